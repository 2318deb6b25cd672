package mcpgw

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/internal/controlplane/api"
	"github.com/tollgate-dev/tollgate/internal/controlplane/api/runsvc"
	"github.com/tollgate-dev/tollgate/internal/identity"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// IdempotencyMetaKey is the _meta key that names a call: the same key
// (from the same caller) gets the one outcome of the one run it started.
// It is the key the executor hands the tool (executor.IdempotencyMetaKey).
const IdempotencyMetaKey = "tollgate/idempotency_key"

// maxKey bounds an idempotency key as given; a longer one is hashed.
const maxKey = 128

// RequestID is the run request id for an idempotency key ("" without
// one: every call is new). Request ids are scoped to their requester by
// the runner, so two agents' keys never meet.
func RequestID(key string) string {
	if key == "" {
		return ""
	}
	if len(key) > maxKey || strings.IndexFunc(key, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		sum := sha256.Sum256([]byte(key))
		return runsvc.MCPRequestPrefix + "sha256:" + hex.EncodeToString(sum[:])
	}
	return runsvc.MCPRequestPrefix + key
}

// idempotencyKey is the call's key from its _meta, if any.
func idempotencyKey(req *mcp.CallToolRequest) (string, error) {
	v, ok := req.Params.GetMeta()[IdempotencyMetaKey]
	if !ok || v == nil {
		return "", nil
	}
	s, ok := v.(string)
	if !ok || s == "" {
		return "", fmt.Errorf("_meta %q must be a non-empty string", IdempotencyMetaKey)
	}
	return s, nil
}

// caller is the request's principal as the API's handlers see a caller:
// authenticated by the bearer token, arriving through MCP.
func caller(ctx context.Context, req *mcp.CallToolRequest) (context.Context, identity.Principal, error) {
	p, ok := principalOf(req.Extra)
	if !ok {
		return nil, identity.Principal{}, errors.New("no authenticated caller")
	}
	return api.As(ctx, p, api.Via{Surface: api.SurfaceMCP}), p, nil
}

// toolError is a result the agent reads as the call's failure (isError),
// never a protocol error: what it says is for the model to act on.
func toolError(format string, a ...any) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf(format, a...)}}}
}

// errorResult is err as a tool error, in the words the API would give
// (api.ToStatus, the one mapping); an internal error is logged and named
// only as that.
func (g *Gateway) errorResult(what string, err error) *mcp.CallToolResult {
	st, _ := status.FromError(api.ToStatus(err))
	switch st.Code() {
	case codes.Internal, codes.Unknown:
		g.cfg.Log.Error("mcp call failed", "what", what, "error", err)
		return toolError("%s: an internal error in the control plane (logged there)", what)
	case codes.Unavailable:
		return toolError("%s: %s; call again with the same %s", what, st.Message(), IdempotencyMetaKey)
	}
	return toolError("%s: %s", what, st.Message())
}

// decodeArgs reads a call's arguments: a JSON object (absent: {}),
// numbers kept exactly as written.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	if err := limits.Value("the call's arguments", len(raw)); err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return map[string]any{}, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var args map[string]any
	if err := d.Decode(&args); err != nil || args == nil {
		return nil, errors.New("the arguments must be a JSON object")
	}
	return args, nil
}

// call is one call of an executor's tool: refused where policy does not
// let the caller call it, else a run of the recipe the call is, waited
// for (await).
func (g *Gateway) call(ctx context.Context, req *mcp.CallToolRequest, server, tool string) (*mcp.CallToolResult, error) {
	ctx, p, err := caller(ctx, req)
	if err != nil {
		return nil, err
	}
	name := server + "." + tool
	// Policy now, not when the list was made.
	if why, ok := g.cfg.Policy.MayCall(ctx, p.Subject, server, tool); !ok {
		return toolError("refused: %s may not call %s: %s", p.Subject, name, why), nil
	}
	info, ok := g.cfg.Catalog().Lookup(server, tool)
	if !ok {
		return toolError("%s is not offered now: no connected executor hosts it", name), nil
	}
	args, err := decodeArgs(req.Params.Arguments)
	if err != nil {
		return toolError("%s: %v", name, err), nil
	}
	key, err := idempotencyKey(req)
	if err != nil {
		return toolError("%v", err), nil
	}
	c := callRecipe{Server: server, Tool: tool, Args: args, SideEffect: info.SideEffect(), Agent: p.Subject, Owner: g.cfg.Policy.OwnerOf(p.Subject)}
	if c.SideEffect {
		if !g.cfg.Policy.Governed() {
			// Without a policy only a run's requester decides: the agent
			// would approve its own call.
			return toolError("refused: %s is side-effecting, and this control plane has no policy, so nobody but the caller could approve it; load a policy (--policy)", name), nil
		}
		js, err := json.Marshal(args)
		if err != nil {
			return toolError("%s: %v", name, err), nil
		}
		if c.Role = g.cfg.Policy.GateRole(p.Subject, server, tool, js); c.Role == "" {
			return toolError("refused: %s is side-effecting and no policy row governs it, so nobody could approve the call (add `p, role:ROLE, DOMAIN, %s, -` and its p2 row)", name, name), nil
		}
		c.Why = fmt.Sprintf("%s changes the world: its MCP annotations do not declare it read-only", name)
	}
	src, inputs, err := c.source()
	if err != nil {
		return toolError("%s: %v", name, err), nil
	}
	run, _, _, err := g.cfg.Starter.Start(ctx, p.Subject, runsvc.Start{RequestID: RequestID(key), Recipe: src, Name: callPlanPrefix + name, Inputs: inputs})
	if err != nil {
		return g.errorResult("the call of "+name+" was not started", err), nil
	}
	return g.await(ctx, req, p.Subject, run.ID)
}
