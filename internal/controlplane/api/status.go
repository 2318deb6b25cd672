package api

import (
	"context"
	"errors"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tollgate-dev/tollgate/internal/controlplane/errkind"
	"github.com/tollgate-dev/tollgate/internal/store"
	"github.com/tollgate-dev/tollgate/pkg/engine"
	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// ToStatus maps a handler error to a gRPC status error. Its message is
// cut to limits.MaxErrorBytes: it may quote what the caller sent.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		if len(st.Message()) <= limits.MaxErrorBytes {
			return err
		}
		return status.Error(st.Code(), limits.Truncate(st.Message(), limits.MaxErrorBytes))
	}
	if len(err.Error()) > limits.MaxErrorBytes {
		err = cutError{err}
	}
	switch {
	case errors.Is(err, errkind.Invalid), errors.Is(err, engine.ErrBadOption), errors.Is(err, engine.ErrReasonRequired),
		errors.Is(err, store.ErrInvalid), errors.Is(err, engine.ErrBadAmend),
		errors.Is(err, engine.ErrEvidence), errors.Is(err, engine.ErrBadName), errors.Is(err, limits.ErrTooLarge):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, errkind.NotFound), errors.Is(err, store.ErrNotFound), errors.Is(err, engine.ErrUnknownAsk):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, errkind.Unauthenticated):
		return status.Error(codes.Unauthenticated, err.Error())
	case errors.Is(err, errkind.Denied), errors.Is(err, engine.ErrForbidden):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, engine.ErrAlreadyDecided), errors.Is(err, engine.ErrExpired), errors.Is(err, engine.ErrRunEnded),
		errors.Is(err, errkind.StalePayload), errors.Is(err, engine.ErrStaleAsk), errors.Is(err, engine.ErrDigestMismatch), errors.Is(err, engine.ErrUnreviewed), errors.Is(err, engine.ErrWrongTransition), errors.Is(err, engine.ErrStaleAttempt),
		errors.Is(err, engine.ErrUnknownStep), errors.Is(err, engine.ErrAlreadyVoted), errors.Is(err, engine.ErrNoVote), errors.Is(err, engine.ErrLinkUsed),
		errors.Is(err, errkind.Precondition), errors.Is(err, engine.ErrNotExternal), errors.Is(err, engine.ErrGateOpen):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, engine.ErrStepDone), errors.Is(err, errkind.RequestReused):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, errkind.Busy):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, errkind.Exhausted):
		return status.Error(codes.ResourceExhausted, err.Error())
	case errors.Is(err, errkind.Unimplemented):
		return status.Error(codes.Unimplemented, err.Error())
	case errors.Is(err, store.ErrUnavailable):
		return status.Error(codes.Unavailable, errkind.ClientText(err))
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	default:
		return status.Error(codes.Internal, err.Error())
	}
}

// cutError is an error whose message is cut to limits.MaxErrorBytes; it
// still matches what it wraps.
type cutError struct{ error }

func (e cutError) Error() string { return limits.Truncate(e.error.Error(), limits.MaxErrorBytes) }
func (e cutError) Unwrap() error { return e.error }

// UnaryErrors is the unary interceptor that maps and logs errors.
func UnaryErrors(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		resp, err := handler(ctx, req)
		if err != nil {
			st := ToStatus(err)
			code := status.Code(st)
			level := slog.LevelInfo
			if code == codes.Internal || code == codes.Unknown {
				level = slog.LevelError
			}
			log.LogAttrs(ctx, level, "rpc failed", slog.String("method", info.FullMethod), slog.String("code", code.String()), slog.String("error", limits.Truncate(err.Error(), limits.MaxErrorBytes)))
			return nil, st
		}
		return resp, nil
	}
}

// StreamErrors is the stream interceptor that maps and logs errors.
func StreamErrors(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		err := handler(srv, ss)
		if err != nil {
			st := ToStatus(err)
			if status.Code(st) == codes.Canceled {
				return st // the client went away; nothing to report
			}
			log.LogAttrs(ss.Context(), slog.LevelInfo, "stream ended with error", slog.String("method", info.FullMethod), slog.String("code", status.Code(st).String()), slog.String("error", limits.Truncate(err.Error(), limits.MaxErrorBytes)))
			return st
		}
		return nil
	}
}

// ServerOptions returns the interceptors every Tollgate gRPC server uses.
func ServerOptions(log *slog.Logger) []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(UnaryErrors(log)),
		grpc.ChainStreamInterceptor(StreamErrors(log)),
		grpc.MaxRecvMsgSize(limits.MaxMessageBytes),
		grpc.MaxSendMsgSize(limits.MaxMessageBytes),
	}
}
