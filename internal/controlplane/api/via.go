package api

import "context"

// Surfaces a decision may come through, recorded with it (engine.Judged's
// Via): the gRPC API (approvectl, scripts, services), the web inbox, and
// Slack (and the MCP gateway, which starts runs). A surface inside the control plane says which it is with
// WithVia; a call through the gRPC listener is always SurfaceAPI, whatever
// its metadata says.
const (
	SurfaceAPI   = "api"
	SurfaceWeb   = "web"
	SurfaceSlack = "slack"
	// SurfaceMCP: an agent's call through the MCP gateway (mcpgw). It
	// starts runs and reads them; it decides nothing.
	SurfaceMCP = "mcp"
)

// Via is the surface a call came through and, for a single-use link, the
// link's id (the engine refuses a second decision through it).
type Via struct {
	Surface string
	Link    string
}

type viaKey struct{}

// WithVia returns ctx naming the surface its calls come through. Only a
// surface inside the control plane that authenticated its caller itself
// (Local) calls it.
func WithVia(ctx context.Context, v Via) context.Context {
	return context.WithValue(ctx, viaKey{}, v)
}

// ViaOf is the surface ctx's call came through: SurfaceAPI unless a
// surface inside the control plane said otherwise.
func ViaOf(ctx context.Context) Via {
	if v, ok := ctx.Value(viaKey{}).(Via); ok && v.Surface != "" {
		return v
	}
	return Via{Surface: SurfaceAPI}
}
