package api

// SharedEncoding reports whether the snapshot event of run at version is
// kept as one shared encoding.
func (w *Watches) SharedEncoding(run string, version int64) bool {
	ev, ok := w.events.Get(eventKey{run: run, version: version, snapshot: true})
	return ok && ev.pm != nil
}
