package store

import (
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// PageToken encodes the sort key of the last item of a page. Tokens are
// opaque to callers; stores share this encoding.
func PageToken(at time.Time, id string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(at.UnixNano(), 10) + "|" + id))
}

// ParsePageToken decodes a PageToken.
func ParsePageToken(tok string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return time.Time{}, "", fmt.Errorf("%w: bad page token", ErrInvalid)
	}
	ns, id, ok := strings.Cut(string(b), "|")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil {
		return time.Time{}, "", fmt.Errorf("%w: bad page token", ErrInvalid)
	}
	return time.Unix(0, n).UTC(), id, nil
}
