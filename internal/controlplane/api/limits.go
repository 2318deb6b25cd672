package api

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/tollgate-dev/tollgate/pkg/limits"
)

// The API server bounds values where they enter and responses where they
// leave (package limits): every string or bytes value of a request is at
// most limits.MaxValueBytes, or the request is refused with
// InvalidArgument naming the field; a response larger than
// limits.MaxMessageBytes has its longest values cut (limits.Truncate's
// marker says so) until it fits, rather than a client's receive failing.

// responseBudget is what a response may hold after cutting: the message
// limit less room for the framing a cut value's shorter length changes.
const responseBudget = limits.MaxMessageBytes - 64<<10

// cutBytes is how much of a cut value a response keeps.
const cutBytes = 1 << 10

// ValueLimits is the unary interceptor that refuses oversized request
// values and fits responses to the message limit.
func ValueLimits() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if m, ok := req.(proto.Message); ok {
			if err := CheckValues(m); err != nil {
				return nil, err
			}
		}
		resp, err := handler(ctx, req)
		if err != nil {
			return nil, err
		}
		if m, ok := resp.(proto.Message); ok {
			return FitResponse(m)
		}
		return resp, nil
	}
}

// StreamValueLimits is ValueLimits for streams: each message received is
// checked, each message sent is fitted.
func StreamValueLimits() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, limitedStream{ss})
	}
}

type limitedStream struct{ grpc.ServerStream }

func (s limitedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if pm, ok := m.(proto.Message); ok {
		return CheckValues(pm)
	}
	return nil
}

func (s limitedStream) SendMsg(m any) error {
	if pm, ok := m.(proto.Message); ok {
		fitted, err := FitResponse(pm)
		if err != nil {
			return err
		}
		m = fitted
	}
	return s.ServerStream.SendMsg(m)
}

// CheckValues refuses a message any of whose string or bytes values is
// longer than limits.MaxValueBytes; the error names the field's path
// (decision.text_answer.text, inputs["who"]) and the limit.
func CheckValues(m proto.Message) error {
	var err error
	walkValues(m.ProtoReflect(), "", func(path string, n int, _ func(int)) bool {
		if e := limits.Value(path, n); e != nil {
			err = e
			return false
		}
		return true
	})
	return err
}

// FitResponse returns m if it fits the message limit, or else a copy of m
// (m may share parts with caches, so it is never changed) whose longest
// string and bytes values are cut, longest first, until it fits. A
// response that cannot be made to fit is ResourceExhausted.
func FitResponse(m proto.Message) (proto.Message, error) {
	n := proto.Size(m)
	if n <= responseBudget {
		return m, nil
	}
	m = proto.Clone(m)
	type leaf struct {
		n   int
		cut func(int)
	}
	var ls []leaf
	walkValues(m.ProtoReflect(), "", func(_ string, size int, cut func(int)) bool {
		if size > 2*cutBytes {
			ls = append(ls, leaf{n: size, cut: cut})
		}
		return true
	})
	slices.SortStableFunc(ls, func(a, b leaf) int { return cmp.Compare(b.n, a.n) })
	for _, l := range ls {
		if n <= responseBudget {
			break
		}
		l.cut(cutBytes)
		n -= l.n - cutBytes - 32 // what is left, and the marker
	}
	if size := proto.Size(m); size > limits.MaxMessageBytes {
		return nil, status.Errorf(codes.ResourceExhausted, "the response is %d bytes even with its longest values cut, more than the %s message limit; ask for less (a smaller page)",
			size, limits.Size(limits.MaxMessageBytes))
	}
	return m, nil
}

// walkValues calls f for every string and bytes value set in m, at any
// depth (lists and maps included), with its path, its length and a
// function that cuts it to n bytes (limits.Truncate). f returns false to
// stop the walk.
func walkValues(m protoreflect.Message, prefix string, f func(path string, n int, cut func(n int)) bool) bool {
	more := true
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		path := prefix + string(fd.Name())
		switch {
		case fd.IsMap():
			mv := v.Map()
			mv.Range(func(k protoreflect.MapKey, e protoreflect.Value) bool {
				p := path + "[" + strconv.Quote(limits.Short(k.String())) + "]"
				if fd.MapKey().Kind() == protoreflect.StringKind && !visit(p+" (key)", k.Value(), nil, f) {
					more = false
					return false
				}
				more = visit(p, e, func(c protoreflect.Value) { mv.Set(k, c) }, f)
				return more
			})
		case fd.IsList():
			l := v.List()
			for i := 0; i < l.Len() && more; i++ {
				more = visit(fmt.Sprintf("%s[%d]", path, i), l.Get(i), func(c protoreflect.Value) { l.Set(i, c) }, f)
			}
		default:
			more = visit(path, v, func(c protoreflect.Value) { m.Set(fd, c) }, f)
		}
		return more
	})
	return more
}

// visit is walkValues for one value: a message is walked, a string or
// bytes value is handed to f (set nil: the value cannot be cut).
func visit(path string, v protoreflect.Value, set func(protoreflect.Value), f func(string, int, func(int)) bool) bool {
	switch x := v.Interface().(type) {
	case protoreflect.Message:
		return walkValues(x, path+".", f)
	case string:
		return f(path, len(x), func(n int) {
			if set != nil {
				set(protoreflect.ValueOfString(limits.Truncate(x, n)))
			}
		})
	case []byte:
		return f(path, len(x), func(n int) {
			if set != nil {
				set(protoreflect.ValueOfBytes([]byte(limits.Truncate(string(x), n))))
			}
		})
	}
	return true
}

// InputsTooLarge bounds a run's inputs, names and values together, as one
// value (each one alone is bounded by CheckValues): what a run holds and
// shows stays within what one message carries.
func InputsTooLarge(in map[string]string) error {
	n := 0
	for k, v := range in {
		n += len(k) + len(v)
	}
	return limits.Value("inputs (names and values together)", n)
}
