package engine

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// filler sets every exported field reachable from a Run to random values
// — zero, empty and nil among them — so a field the encoding forgets
// (one added to a struct later, say) fails the round trip. seen records
// which fields it ever set to something other than the zero value.
type filler struct {
	rng  *rand.Rand
	seen map[string]bool
}

var (
	timeType    = reflect.TypeFor[time.Time]()
	optionType  = reflect.TypeFor[plan.Option]()
	digestChars = "0123456789abcdef"
)

func (f *filler) fill(v reflect.Value, path string) {
	switch v.Type() {
	case timeType:
		v.Set(reflect.ValueOf(f.time()))
		return
	case optionType:
		// Labels only, as the engine keeps them; a plan's continuation
		// is checked by TestOptionContinuationsRoundTrip.
		o := plan.Option{ID: f.str(), Label: f.str()}
		v.Set(reflect.ValueOf(o))
		f.seen[path+".ID"], f.seen[path+".Label"] = true, true
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() {
				continue
			}
			fv := v.Field(i)
			f.fill(fv, path+"."+sf.Name)
			if !fv.IsZero() {
				f.seen[path+"."+sf.Name] = true
			}
		}
	case reflect.String:
		v.SetString(f.str())
	case reflect.Bool:
		v.SetBool(f.rng.IntN(2) == 0)
	case reflect.Int, reflect.Int64:
		switch f.rng.IntN(4) {
		case 0:
			v.SetInt(0)
		case 1:
			v.SetInt(int64(f.rng.IntN(5)))
		case 2:
			v.SetInt(-int64(f.rng.Uint64() >> 1))
		default:
			v.SetInt(int64(f.rng.Uint64() >> 1))
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // raw bytes: JSON, artifacts
			switch f.rng.IntN(4) {
			case 0:
				v.SetBytes(nil)
			case 1:
				v.SetBytes([]byte{})
			default:
				b := make([]byte, f.rng.IntN(40))
				for i := range b {
					b[i] = byte(f.rng.Uint32())
				}
				v.SetBytes(b)
			}
			return
		}
		n := f.rng.IntN(4) - 1
		if n < 0 {
			v.SetZero()
			return
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			f.fill(s.Index(i), path+"[]")
		}
		v.Set(s)
	case reflect.Map:
		n := f.rng.IntN(4) - 1
		if n < 0 {
			v.SetZero()
			return
		}
		m := reflect.MakeMapWithSize(v.Type(), n)
		for range n {
			k := reflect.New(v.Type().Key()).Elem()
			f.fill(k, path+"{key}")
			e := reflect.New(v.Type().Elem()).Elem()
			f.fill(e, path+"{}")
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	case reflect.Pointer:
		if f.rng.IntN(8) == 0 {
			v.SetZero()
			return
		}
		p := reflect.New(v.Type().Elem())
		f.fill(p.Elem(), path)
		v.Set(p)
	default:
		panic(fmt.Sprintf("filler: %s is a %s: teach the filler (and check the encoding)", path, v.Kind()))
	}
}

func (f *filler) str() string {
	switch f.rng.IntN(7) {
	case 0:
		return ""
	case 6: // one of the strings written as an index
		return commonStrings[f.rng.IntN(len(commonStrings))]
	case 1: // a digest, kept as its 32 bytes
		var b strings.Builder
		b.WriteString("sha256:")
		for range 64 {
			b.WriteByte(digestChars[f.rng.IntN(16)])
		}
		return b.String()
	case 2: // almost a digest: kept as text
		return "sha256:" + strings.Repeat("A", 64)
	default:
		b := make([]byte, f.rng.IntN(20))
		for i := range b {
			b[i] = byte(f.rng.Uint32())
		}
		return string(b)
	}
}

func (f *filler) time() time.Time {
	base := time.Date(2026, 12, 4, 0, 31, 19, 801530132, time.UTC)
	switch f.rng.IntN(7) {
	case 0:
		return time.Time{}
	case 1:
		return base
	case 2:
		return base.Add(time.Duration(f.rng.Int64N(int64(72 * time.Hour))))
	case 3:
		return base.Add(-time.Duration(f.rng.Int64N(int64(10 * 365 * 24 * time.Hour))))
	case 4: // beyond nanoseconds in an int64
		return time.Date(1+f.rng.IntN(9000), time.Month(1+f.rng.IntN(12)), 1, 2, 3, 4, f.rng.IntN(1e9), time.UTC)
	case 5:
		return base.In(time.FixedZone("CET", 3600)).Add(time.Duration(f.rng.Int64N(1e12)))
	default:
		return time.Unix(f.rng.Int64N(1e10)-5e9, f.rng.Int64N(1e9)).UTC()
	}
}

func randomRun(rng *rand.Rand, seen map[string]bool) *Run {
	f := &filler{rng: rng, seen: seen}
	var r Run
	f.fill(reflect.ValueOf(&r).Elem(), "Run")
	return &r
}

// Every Run round-trips exactly through the compact encoding, and the
// filler reached every field (so a new field cannot hide from the test).
func TestBinaryRoundTripsEveryField(t *testing.T) {
	seen := map[string]bool{}
	for seed := range 3000 {
		r := randomRun(rand.New(rand.NewPCG(uint64(seed), 22)), seen)
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var got Run
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if !reflect.DeepEqual(&got, r) {
			t.Fatalf("seed %d: round trip differs:\n got %#v\nwant %#v", seed, got, *r)
		}
		// Deterministic: the same run encodes to the same bytes.
		if b2, _ := got.MarshalBinary(); string(b2) != string(b) {
			t.Fatalf("seed %d: encoding is not deterministic", seed)
		}
	}
	var missing []string
	walkFields(reflect.TypeFor[Run](), "Run", func(path string) {
		if !seen[path] {
			missing = append(missing, path)
		}
	})
	if len(missing) > 0 {
		t.Fatalf("the filler never set %v: the test does not cover them", missing)
	}
}

// walkFields calls f with the path of every exported field reachable from
// t, as filler names them.
func walkFields(t reflect.Type, path string, f func(string)) {
	switch t.Kind() {
	case reflect.Pointer, reflect.Slice:
		if t.Elem().Kind() != reflect.Uint8 {
			suffix := ""
			if t.Kind() == reflect.Slice {
				suffix = "[]"
			}
			walkFields(t.Elem(), path+suffix, f)
		}
	case reflect.Map:
		walkFields(t.Elem(), path+"{}", f)
	case reflect.Struct:
		if t == timeType {
			return
		}
		if t == optionType {
			f(path + ".ID")
			f(path + ".Label")
			return
		}
		for i := range t.NumField() {
			sf := t.Field(i)
			if sf.IsExported() {
				f(path + "." + sf.Name)
				walkFields(sf.Type, path+"."+sf.Name, f)
			}
		}
	}
}

// A stopping point's option that carries its continuation (never in a
// run today: the engine keeps labels) still comes back whole.
func TestOptionContinuationsRoundTrip(t *testing.T) {
	p := compile(t, "ask me:\n  go ahead?\n  if no:\n    undo: notes.store {\"why\":\"no\"}\nsave: notes.store {\"text\": \"x\"}\n")
	var opts []plan.Option
	for _, sp := range p.StoppingPoints {
		opts = append(opts, sp.Options...)
	}
	if len(opts) == 0 {
		t.Fatal("the plan has no options")
	}
	r := &Run{ID: "r", Asks: map[string]*AskRun{"a": {ID: "a", Options: opts}}}
	b, _ := r.MarshalBinary()
	var got Run
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(r)
	have, _ := json.Marshal(&got)
	if string(want) != string(have) {
		t.Fatalf("options differ:\n got %s\nwant %s", have, want)
	}
}

// The stored form is valid JSON that encoding/json reads into a Run (what
// a reader that knows only JSON does), DecodeStored reads it and the
// object runs were stored as before, and a decoded run moves on exactly
// as the original does.
func TestStoredFormIsReadEveryWay(t *testing.T) {
	m, err := New(compile(t, "ask me:\n  go ahead?\nsave: notes.store {\"text\": \"bench\"}\n"), Config{DefaultExpiry: 72 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	tr := m.Start("r_ffrm8h2g7kzk", "u007", t0)
	run := tr.Run
	if run.State != Parked {
		t.Fatalf("run is %s", run.State)
	}
	stored, err := EncodeStored(run)
	if err != nil {
		t.Fatal(err)
	}
	legacy, _ := json.Marshal(run)
	bin, _ := run.MarshalBinary()
	t.Logf("a parked run: JSON %d B, compact %d B (stored as JSON %d B)", len(legacy), len(bin), len(stored))
	if len(bin)*3 > len(legacy) {
		t.Errorf("the compact encoding (%d B) is not a third of the JSON (%d B)", len(bin), len(legacy))
	}
	if !json.Valid(stored) {
		t.Fatalf("stored form is not JSON: %s", stored)
	}
	for name, data := range map[string][]byte{"stored": stored, "legacy JSON": legacy} {
		var viaJSON Run
		if err := json.Unmarshal(data, &viaJSON); err != nil {
			t.Fatalf("%s through encoding/json: %v", name, err)
		}
		got, err := DecodeStored(data)
		if err != nil {
			t.Fatalf("%s through DecodeStored: %v", name, err)
		}
		for _, r := range []*Run{&viaJSON, got} {
			if r.ID != run.ID || r.Requester != run.Requester || r.Asks["ask_1"] == nil || !r.Asks["ask_1"].ExpiresAt.Equal(run.Asks["ask_1"].ExpiresAt) {
				t.Fatalf("%s read back as %+v", name, r)
			}
		}
	}
	back, err := DecodeStored(stored)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(withoutTally(back), withoutTally(run)) {
		t.Fatalf("stored run differs:\n got %+v\nwant %+v", back, run)
	}
	a1 := run.Asks["ask_1"]
	ev := Decide{Ask: "ask_1", Actor: "u007", Option: "1", At: t0.Add(time.Minute),
		Judged: JudgedOn(a1, a1.PayloadDigest(), a1.EvidenceDigest(), true)}
	a, errA := m.Apply(run, ev)
	b, errB := m.Apply(back, ev)
	if errA != nil || errB != nil {
		t.Fatalf("apply: %v / %v", errA, errB)
	}
	ja, _ := json.Marshal(a.Run)
	jb, _ := json.Marshal(b.Run)
	if string(ja) != string(jb) || len(a.Effects) != len(b.Effects) || len(a.Records) != len(b.Records) {
		t.Fatalf("the decoded run moved on differently:\n%s\n%s", ja, jb)
	}
}

func withoutTally(r *Run) *Run {
	c := *r
	c.tally = nil
	return &c
}

// Damaged input is an error, never a panic or a huge allocation.
func TestBinaryRefusesDamage(t *testing.T) {
	r := randomRun(rand.New(rand.NewPCG(1, 2)), map[string]bool{})
	b, _ := r.MarshalBinary()
	for _, tc := range []struct {
		name string
		in   []byte
	}{
		{"empty", nil},
		{"another version", append([]byte{9}, b[1:]...)},
		{"cut short", b[:len(b)/2]},
		{"trailing bytes", append(append([]byte{}, b...), 0)},
		{"a count beyond the end", []byte{binVersion, 1 << 1, 0x80, 0x80, 0x80, 0x80, 0x10}},
		{"unknown field", []byte{binVersion, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}},
	} {
		var got Run
		if err := got.UnmarshalBinary(tc.in); !errors.Is(err, ErrBadEncoding) {
			t.Errorf("%s: %v, want ErrBadEncoding", tc.name, err)
		}
	}
	if _, err := DecodeStored([]byte(`"not base64!"`)); !errors.Is(err, ErrBadEncoding) {
		t.Errorf("bad base64: %v", err)
	}
}

// FuzzBinary: any bytes either fail to decode or decode to a run whose
// encoding decodes to the same run.
func FuzzBinary(f *testing.F) {
	for seed := range 8 {
		b, _ := randomRun(rand.New(rand.NewPCG(uint64(seed), 3)), map[string]bool{}).MarshalBinary()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var r Run
		if err := r.UnmarshalBinary(in); err != nil {
			return
		}
		b, err := r.MarshalBinary()
		if err != nil {
			t.Fatal(err)
		}
		var again Run
		if err := again.UnmarshalBinary(b); err != nil {
			t.Fatalf("re-encoded run does not decode: %v", err)
		}
		if !reflect.DeepEqual(again, r) {
			t.Fatalf("not stable:\n%#v\n%#v", again, r)
		}
	})
}

func BenchmarkEncodeRun(b *testing.B) {
	m, err := New(compile(b, "ask me:\n  go ahead?\nsave: notes.store {\"text\": \"bench\"}\n"), Config{DefaultExpiry: 72 * time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	run := m.Start("r_ffrm8h2g7kzk", "u007", t0).Run
	stored, _ := EncodeStored(run)
	legacy, _ := json.Marshal(run)
	b.Run("compact", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := EncodeStored(run); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(run); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-compact", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeStored(stored); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeStored(legacy); err != nil {
				b.Fatal(err)
			}
		}
	})
}
