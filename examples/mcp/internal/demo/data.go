package demo

import "encoding/json"

// Data is the shape of data.json: canned answers for the read-only tools.
// Records the tools return whole are kept as raw JSON.
type Data struct {
	Calendar struct {
		Calendars map[string][]Event `json:"calendars"`
	} `json:"google-calendar"`
	Gmail struct {
		Messages []Mail `json:"messages"`
	} `json:"gmail"`
	Slack struct {
		Messages []SlackMessage `json:"messages"`
	} `json:"slack"`
	GitHub struct {
		Repos map[string]Repo `json:"repos"`
	} `json:"github"`
	ERP struct {
		Vendors        map[string]json.RawMessage `json:"vendors"`
		Invoices       map[string]json.RawMessage `json:"invoices"`
		PurchaseOrders map[string]json.RawMessage `json:"purchase_orders"`
	} `json:"erp"`
}

// Event is a calendar event.
type Event struct {
	ID          string   `json:"id"`
	Summary     string   `json:"summary"`
	Start       string   `json:"start"`
	End         string   `json:"end"`
	Location    string   `json:"location,omitempty"`
	Organizer   string   `json:"organizer,omitempty"`
	Attendees   []string `json:"attendees,omitempty"`
	Description string   `json:"description,omitempty"`
	Status      string   `json:"status,omitempty"`
}

// Mail is a Gmail message summary.
type Mail struct {
	ID       string   `json:"id"`
	ThreadID string   `json:"threadId"`
	LabelIDs []string `json:"labelIds"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	Subject  string   `json:"subject"`
	Date     string   `json:"date"`
	Snippet  string   `json:"snippet"`
}

// SlackMessage is a Slack search hit.
type SlackMessage struct {
	Channel    string `json:"channel"`
	User       string `json:"user"`
	TS         string `json:"ts"`
	Text       string `json:"text"`
	MentionsMe bool   `json:"mentions_me"`
}

// Repo is a GitHub repository's canned pull requests, diffs and files,
// keyed by PR number (as a string) and path.
type Repo struct {
	PullRequests map[string]json.RawMessage `json:"pull_requests"`
	Diffs        map[string]string          `json:"diffs"`
	Files        map[string]string          `json:"files"`
}
