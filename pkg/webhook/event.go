package webhook

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"time"
)

// Event kinds: the moments of an ask's life (DESIGN.md §5) a person may
// want to hear about.
const (
	KindOpened    = "ask.opened"    // an ask was parked and routed
	KindReminder  = "ask.reminder"  // its remind time passed, still pending
	KindEscalated = "ask.escalated" // routed to a wider audience
	KindExpired   = "ask.expired"   // its deadline passed undecided
	KindDecided   = "ask.decided"   // approved, rejected, revoked, …; Payload says which
)

// KnownKind reports whether k is one of the Kind constants.
func KnownKind(k string) bool {
	switch k {
	case KindOpened, KindReminder, KindEscalated, KindExpired, KindDecided:
		return true
	}
	return false
}

// Event is one notification about an ask. It is the "event" object of the
// JSON body, field names as tagged.
type Event struct {
	ID         string         `json:"id"`   // stable across attempts and endpoints: receivers dedupe on it; Notify sets one when empty
	Kind       string         `json:"kind"` // one of the Kind constants
	AskID      string         `json:"ask_id"`
	RunID      string         `json:"run_id,omitempty"`
	Title      string         `json:"title,omitempty"`
	Audience   string         `json:"audience,omitempty"` // the role asked, or a person (ask me, an escalation target)
	People     []string       `json:"people,omitempty"`   // people named on the ask (approvers, delegate)
	ExpiresAt  time.Time      `json:"expires_at,omitzero"`
	OccurredAt time.Time      `json:"occurred_at,omitzero"` // Notify sets Config.Now() when zero
	Payload    map[string]any `json:"payload,omitempty"`    // sent as is: put nothing here an endpoint's owner may not read
	// Journal, when set, records this event's deliveries instead of
	// Config.Recorder: the sender knows where the event's record lives
	// (the run it is about), the Notifier need not. Never sent.
	Journal Recorder `json:"-"`
}

// Envelope is the JSON body of one delivery. DeliveryID equals the
// Tollgate-Delivery header and Event.Kind the Tollgate-Event header; both
// are signed as part of the body, the headers are not.
type Envelope struct {
	DeliveryID string `json:"delivery_id"` // unique per request, retries included
	Attempt    int    `json:"attempt"`     // 1-based
	Event      Event  `json:"event"`
}

// Endpoint is one receiver of webhooks.
type Endpoint struct {
	Name       string   // stable, unique; appears in Delivery records and logs (the URL never does)
	URL        string   // http or https; the request is a POST
	Secret     []byte   // signs every request; at least MinSecretLen bytes
	OldSecrets [][]byte // also signed with while the receiver moves to Secret
	Roles      []string // audiences (roles) this endpoint hears about; "*" is every event
	People     []string // people this endpoint hears about
	Kinds      []string // event kinds; empty is all
}

// MinSecretLen is the shortest endpoint secret accepted.
const MinSecretLen = 16

// Wants reports whether e receives ev: the kind is one of e.Kinds (or
// e.Kinds is empty), and e.Roles holds "*" or ev.Audience, or e.People holds
// ev.Audience or one of ev.People. An endpoint with no roles and no people
// receives nothing.
func (e Endpoint) Wants(ev Event) bool {
	if len(e.Kinds) > 0 && !slices.Contains(e.Kinds, ev.Kind) {
		return false
	}
	if slices.Contains(e.Roles, "*") {
		return true
	}
	if ev.Audience != "" && (slices.Contains(e.Roles, ev.Audience) || slices.Contains(e.People, ev.Audience)) {
		return true
	}
	for _, p := range ev.People {
		if p != "" && slices.Contains(e.People, p) {
			return true
		}
	}
	return false
}

func (e Endpoint) validate() error {
	if e.Name == "" {
		return fmt.Errorf("webhook: endpoint has no name")
	}
	u, err := url.Parse(e.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("webhook: endpoint %s: URL must be absolute http or https", e.Name)
	}
	if len(e.Secret) < MinSecretLen {
		return fmt.Errorf("webhook: endpoint %s: secret shorter than %d bytes", e.Name, MinSecretLen)
	}
	for _, k := range e.OldSecrets {
		if len(k) < MinSecretLen {
			return fmt.Errorf("webhook: endpoint %s: old secret shorter than %d bytes", e.Name, MinSecretLen)
		}
	}
	if 1+len(e.OldSecrets) > MaxSignatures {
		return fmt.Errorf("webhook: endpoint %s: more than %d secrets", e.Name, MaxSignatures)
	}
	for _, k := range e.Kinds {
		if !KnownKind(k) {
			return fmt.Errorf("webhook: endpoint %s: unknown kind %q", e.Name, k)
		}
	}
	return nil
}

func (e Endpoint) secrets() [][]byte {
	return append([][]byte{e.Secret}, e.OldSecrets...)
}

// newID returns prefix and 32 random hex digits.
func newID(prefix string) string {
	var b [16]byte
	rand.Read(b[:]) // never fails (crypto/rand)
	return prefix + hex.EncodeToString(b[:])
}
