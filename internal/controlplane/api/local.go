package api

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	tollgatev1 "github.com/tollgate-dev/tollgate/gen/tollgate/v1"
	"github.com/tollgate-dev/tollgate/internal/identity"
)

// Local is the API as the control plane's own surfaces call it (the web
// inbox, Slack's interactivity endpoint): the same handlers as the gRPC
// listener, behind the same value limits, with errors mapped to gRPC
// status by the same function (ToStatus), so a decision from any surface
// is judged, bound and journaled alike. What differs is who vouches for
// the caller: the surface authenticated them itself and says so with
// Caller, and names itself with Via.
type Local struct {
	Approvals tollgatev1.ApprovalServiceServer
	Runs      tollgatev1.RunServiceServer
	Log       *slog.Logger
}

// As is ctx carrying p as the authenticated caller, arriving through v.
// p must be a person or service the surface authenticated.
func As(ctx context.Context, p identity.Principal, v Via) context.Context {
	return WithVia(identity.WithPrincipal(ctx, p), v)
}

// call runs one unary handler as the gRPC server's interceptors would:
// request values bounded, response fitted, errors mapped and logged.
func call[Req, Resp proto.Message](ctx context.Context, l Local, method string, req Req, h func(context.Context, Req) (Resp, error)) (Resp, error) {
	var zero Resp
	log := l.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	handler := func(ctx context.Context, r any) (any, error) { return h(ctx, r.(Req)) }
	limited := func(ctx context.Context, r any) (any, error) {
		return ValueLimits()(ctx, r, &grpc.UnaryServerInfo{FullMethod: method}, handler)
	}
	out, err := UnaryErrors(log)(ctx, req, &grpc.UnaryServerInfo{FullMethod: method}, limited)
	if err != nil {
		return zero, err
	}
	return out.(Resp), nil
}

// ListAsks is ApprovalService.ListAsks.
func (l Local) ListAsks(ctx context.Context, req *tollgatev1.ListAsksRequest) (*tollgatev1.ListAsksResponse, error) {
	return call(ctx, l, tollgatev1.ApprovalService_ListAsks_FullMethodName, req, l.Approvals.ListAsks)
}

// GetAsk is ApprovalService.GetAsk.
func (l Local) GetAsk(ctx context.Context, req *tollgatev1.GetAskRequest) (*tollgatev1.GetAskResponse, error) {
	return call(ctx, l, tollgatev1.ApprovalService_GetAsk_FullMethodName, req, l.Approvals.GetAsk)
}

// Decide is ApprovalService.Decide.
func (l Local) Decide(ctx context.Context, req *tollgatev1.DecideRequest) (*tollgatev1.DecideResponse, error) {
	return call(ctx, l, tollgatev1.ApprovalService_Decide_FullMethodName, req, l.Approvals.Decide)
}

// WhoAmI is ApprovalService.WhoAmI.
func (l Local) WhoAmI(ctx context.Context, req *tollgatev1.WhoAmIRequest) (*tollgatev1.WhoAmIResponse, error) {
	return call(ctx, l, tollgatev1.ApprovalService_WhoAmI_FullMethodName, req, l.Approvals.WhoAmI)
}

// GetRun is RunService.GetRun.
func (l Local) GetRun(ctx context.Context, req *tollgatev1.GetRunRequest) (*tollgatev1.GetRunResponse, error) {
	return call(ctx, l, tollgatev1.RunService_GetRun_FullMethodName, req, l.Runs.GetRun)
}

// ListRuns is RunService.ListRuns.
func (l Local) ListRuns(ctx context.Context, req *tollgatev1.ListRunsRequest) (*tollgatev1.ListRunsResponse, error) {
	return call(ctx, l, tollgatev1.RunService_ListRuns_FullMethodName, req, l.Runs.ListRuns)
}

// WatchAsks is ApprovalService.WatchAsks: each change is handed to send
// until ctx ends or send fails.
func (l Local) WatchAsks(ctx context.Context, req *tollgatev1.WatchAsksRequest, send func(*tollgatev1.WatchAsksResponse) error) error {
	if err := CheckValues(req); err != nil {
		return ToStatus(err)
	}
	log := l.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ss := &localStream[tollgatev1.WatchAsksResponse]{ctx: ctx, send: send}
	return StreamErrors(log)(l.Approvals, limitedStream{ss}, &grpc.StreamServerInfo{FullMethod: tollgatev1.ApprovalService_WatchAsks_FullMethodName, IsServerStream: true},
		func(_ any, s grpc.ServerStream) error {
			return l.Approvals.WatchAsks(req, &typedStream[tollgatev1.WatchAsksResponse]{s})
		})
}

// localStream is a server stream whose messages go to a function.
type localStream[T any] struct {
	ctx  context.Context
	send func(*T) error
}

func (s *localStream[T]) Context() context.Context     { return s.ctx }
func (s *localStream[T]) SetHeader(metadata.MD) error  { return nil }
func (s *localStream[T]) SendHeader(metadata.MD) error { return nil }
func (s *localStream[T]) SetTrailer(metadata.MD)       {}
func (s *localStream[T]) RecvMsg(any) error            { return nil }
func (s *localStream[T]) SendMsg(m any) error          { return s.send(m.(*T)) }

// typedStream is grpc.ServerStreamingServer[T] over a ServerStream.
type typedStream[T any] struct{ grpc.ServerStream }

func (s *typedStream[T]) Send(m *T) error { return s.ServerStream.SendMsg(m) }
