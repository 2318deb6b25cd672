package wire

import (
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Time is t as a proto timestamp; the zero time is no timestamp (nil), so
// a time that has not happened yet is absent rather than year 1.
func Time(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}
