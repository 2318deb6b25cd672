package dispatch

// recordWorkers run the handlers that record what executors say (acks,
// starts, results) on goroutines that outlive one message: each handler's
// deep call path (engine, commit, store) then reuses a stack already grown
// instead of growing a fresh one every time. A handler that finds every
// worker busy gets a goroutine of its own, which Run waits for as well.
const recordWorkers = 64

// handle runs f on an idle record worker, or on a goroutine of its own
// that Run waits for; once Run has stopped, on the caller's goroutine (no
// goroutine outlives its owner).
func (d *Dispatcher) handle(f func()) {
	select {
	case d.work <- f:
		return
	default:
	}
	d.hmu.Lock()
	if d.stopped {
		d.hmu.Unlock()
		f()
		return
	}
	d.handlers.Add(1) // under hmu, so never concurrent with Run's Wait
	d.hmu.Unlock()
	go func() {
		defer d.handlers.Done()
		f()
	}()
}

func (d *Dispatcher) recordWorker() {
	for {
		select {
		case f := <-d.work:
			f()
		case <-d.stop:
			return
		}
	}
}
