package executor

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
)

// A stand-in endpoint: this is the unit test of the code that talks to a
// model service.
func TestChatCompletions(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string
			Messages []struct{ Role, Content string }
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer k" || req.Model != "m" || req.Messages[0].Content != "say hi" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		_, _ = w.Write([]byte(`{"choices":[{"message":{"role":"assistant","content":"hi"}}]}`))
	}))
	defer srv.Close()
	c := ChatCompletions{BaseURL: srv.URL + "/v1", Model: "m", APIKey: "k", Client: srv.Client()}
	got, err := c.Complete(context.Background(), "say hi")
	if err != nil || got != "hi" {
		t.Fatalf("%q %v", got, err)
	}
	c.APIKey = "wrong"
	var te *ToolError
	if _, err := c.Complete(context.Background(), "say hi"); !errors.As(err, &te) {
		t.Fatalf("an endpoint's refusal is the step's failure: %v", err)
	}
}
