package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ModelConfig names an OpenAI-compatible chat-completions endpoint for
// prose steps. With no base URL the template provider is used.
type ModelConfig struct {
	BaseURL   string `yaml:"base_url"`    // e.g. https://api.openai.com/v1
	Model     string `yaml:"model"`       // e.g. gpt-4o-mini
	APIKeyEnv string `yaml:"api_key_env"` // the environment variable holding the key
}

// ChatCompletions runs prose steps on an OpenAI-compatible endpoint.
type ChatCompletions struct {
	BaseURL string
	Model   string
	APIKey  string
	Client  *http.Client
}

// Name implements Prose.
func (c ChatCompletions) Name() (string, string) { return "openai-compatible", c.Model }

// Complete implements Prose: one user message, the first choice's text.
func (c ChatCompletions) Complete(ctx context.Context, prompt string) (string, error) {
	body, _ := json.Marshal(map[string]any{
		"model":    c.Model,
		"messages": []map[string]string{{"role": "user", "content": prompt}},
	})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.BaseURL, "/")+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return "", &TransportError{Message: err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	client := c.Client
	if client == nil {
		client = &http.Client{Timeout: 2 * time.Minute}
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", &TransportError{Message: "model endpoint: " + err.Error()}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return "", &TransportError{Message: "model endpoint: " + err.Error()}
	}
	if resp.StatusCode != http.StatusOK {
		return "", &ToolError{Message: fmt.Sprintf("model endpoint answered %s: %s", resp.Status, strings.TrimSpace(string(b)))}
	}
	var out struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &out); err != nil || len(out.Choices) == 0 {
		return "", &ToolError{Message: "model endpoint returned no choice"}
	}
	return out.Choices[0].Message.Content, nil
}
