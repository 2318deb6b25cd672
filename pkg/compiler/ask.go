package compiler

import (
	"encoding/json"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/pkg/plan"
)

// ask parses an ask header and its body. The body is every following line
// indented under the header or starting with "- ". It returns the index of
// the first line after the body.
func (p *parser) ask(i, end int) (*srcAsk, int) {
	l := p.lines[i]
	m := askRe.FindStringSubmatchIndex(l.text)
	if m == nil {
		p.d.errorf(l.pos(0), CodeSyntax, "cannot read this ask: write `ask me:`, `ask ROLE:`, `ask me as NAME:` or `ask me (text) as NAME:`")
		return &srcAsk{pos: l.pos(0), who: plan.AudienceRequester, question: []string{"?"}}, i + 1
	}
	a := &srcAsk{pos: l.pos(0), who: l.text[m[2]:m[3]], text: m[4] >= 0}
	if m[6] >= 0 {
		a.as = l.text[m[6]:m[7]]
		a.asPos = l.pos(m[6])
		if reserved[strings.ToLower(a.as)] {
			p.d.errorf(a.asPos, CodeReservedID, "`%s` is a word of the recipe language; name the ask something else", a.as)
		}
	}
	if q := strings.TrimSpace(l.text[m[8]:m[9]]); q != "" {
		a.question = append(a.question, q)
	}
	i++
	for i < end {
		bl := p.lines[i]
		if blank(bl) {
			i++
			continue
		}
		dash := strings.HasPrefix(bl.text, "- ")
		if bl.indent <= l.indent && !dash {
			break
		}
		t := bl.text
		off := 0
		if dash {
			t = strings.TrimLeft(t[2:], " ")
			off = len(bl.text) - len(t)
		}
		switch {
		case ifNoRe.MatchString(t):
			if a.ifNo != nil {
				p.d.errorf(bl.pos(off), CodeBadSetting, "this ask already has an `if no:` block (line %d)", a.ifNoPos.Line)
			}
			a.ifNoPos = bl.pos(off)
			j := i + 1
			for j < end && (blank(p.lines[j]) || p.lines[j].indent > bl.indent) {
				j++
			}
			a.ifNo = p.phase(i+1, j)
			i = j
			continue
		case settingRe.MatchString(t):
			sm := settingRe.FindStringSubmatchIndex(t)
			p.setting(a, t[sm[2]:sm[3]], strings.TrimSpace(t[sm[4]:sm[5]]), bl, off, off+sm[4])
		default:
			if wm := wordColon.FindStringSubmatch(t); wm != nil {
				if near := nearest(wm[1], settingNames); near != "" && near != wm[1] {
					p.d.errorf(bl.pos(off), CodeBadSetting, "unknown setting `%s:`; did you mean `%s:`?", wm[1], near)
					break
				}
			}
			if sm := stepRe.FindStringSubmatch(t); sm != nil && toolRe.MatchString(sm[2]) {
				p.d.errorf(bl.pos(off), CodeSyntax, "step `%s` is indented inside the ask's question; steps after an ask are what happens on Yes: write it unindented below the ask", sm[1])
				break
			}
			a.question = append(a.question, t)
		}
		i++
	}
	if len(a.question) == 0 {
		p.d.errorf(a.pos, CodeSyntax, "this ask has no question: write it on the next line, indented or after `- `")
	}
	return a, i
}

func (p *parser) setting(a *srcAsk, key, val string, l line, keyOff, valOff int) {
	pos := l.pos(keyOff)
	vpos := l.pos(valOff)
	dur := func(what string) string {
		d, err := parseDuration(val)
		if err != nil {
			p.d.errorf(vpos, CodeBadDuration, "`%s:` %v", what, err)
			return ""
		}
		return plan.FormatDuration(d)
	}
	switch key {
	case "summary":
		a.summary = val
	case "show":
		spans := plan.ScanRefs(val)
		if len(spans) == 0 {
			p.d.errorf(vpos, CodeBadSetting, "`show:` lists step outputs in braces, such as `show: {match}, {vendor}`")
		}
		for _, sp := range spans {
			for _, r := range sp.Refs {
				a.show = append(a.show, srcRef{ref: r, pos: l.pos(valOff + sp.Start)})
			}
		}
	case "options":
		a.optPos = vpos
		for _, o := range strings.Split(val, "|") {
			o = strings.TrimSpace(o)
			if o == "" {
				p.d.errorf(vpos, CodeBadSetting, "`options:` has an empty option; separate labels with |, such as `options: sequence | class | state`")
				continue
			}
			for _, prev := range a.options {
				if strings.EqualFold(prev, o) {
					p.d.errorf(vpos, CodeBadSetting, "option %q is listed twice", o)
				}
			}
			if _, err := strconv.Atoi(o); err == nil {
				p.d.errorf(vpos, CodeBadSetting, "option %q is a bare number, which people type to pick an option by position; use a word", o)
			}
			a.options = append(a.options, o)
		}
		if len(a.options) < 2 {
			p.d.errorf(vpos, CodeBadSetting, "`options:` needs at least two labels separated by |")
		}
	case "expires":
		a.expires = dur("expires")
	case "remind after":
		a.remindAfter = dur("remind after")
	case "escalate after":
		em := escalateRe.FindStringSubmatch(val)
		if em == nil {
			p.d.errorf(vpos, CodeBadSetting, "`escalate after:` takes a duration and whom to escalate to, such as `escalate after: 4h to finance-lead`")
			return
		}
		val = em[1]
		a.escalateAfter = dur("escalate after")
		a.escalateTo = em[2]
	case "on expiry":
		switch val {
		case "reject", "cancel", "escalate":
			a.onExpiry = val
			a.onExpiryPos = vpos
		case "approve", "yes":
			p.d.errorf(vpos, CodeBadSetting, "an ask is never approved by default: `on expiry:` may be `reject`, `cancel` or `escalate`")
		default:
			p.d.errorf(vpos, CodeBadSetting, "`on expiry:` is `reject`, `cancel` or `escalate`; got %q", val)
		}
	case "approvers":
		list := val
		if qm := quorumRe.FindStringSubmatch(val); qm != nil {
			a.quorum, _ = strconv.Atoi(qm[1])
			list = qm[2]
			if a.quorum < 1 {
				p.d.errorf(vpos, CodeBadSetting, "a quorum needs at least one approver")
			}
		}
		for _, who := range strings.Split(list, ",") {
			if who = strings.TrimSpace(who); who != "" {
				a.approvers = append(a.approvers, who)
			}
		}
		if len(a.approvers) == 0 {
			p.d.errorf(vpos, CodeBadSetting, "`approvers:` names people or roles, such as `approvers: 2 of finance`")
		}
	case "check":
		cm := checkRe.FindStringSubmatch(val)
		if cm == nil {
			p.d.errorf(vpos, CodeBadSetting, "`check:` is `NAME = SERVER.TOOL {args} fields F1, F2`, such as `check: vendor = erp.get_vendor {\"id\":\"V-1\"} fields bank_account, status`")
			return
		}
		c := &checkSpec{id: cm[1], server: cm[2], tool: cm[3], args: map[string]any{}, pos: vpos}
		if cm[4] != "" {
			dec := json.NewDecoder(strings.NewReader(cm[4]))
			dec.UseNumber()
			if err := dec.Decode(&c.args); err != nil {
				p.d.errorf(vpos, CodeBadArgs, "the args of the check probe are not a JSON object: %v", err)
			}
		}
		for _, f := range strings.Split(cm[5], ",") {
			if f = strings.TrimSpace(f); f != "" {
				c.fields = append(c.fields, f)
			}
		}
		if c.id == "" {
			c.id = c.server + "." + c.tool
		}
		a.check = c
	case "amend":
		for _, part := range strings.Split(val, ",") {
			part = strings.TrimSpace(part)
			am := amendRe.FindStringSubmatch(part)
			if am == nil {
				p.d.errorf(vpos, CodeBadSetting, "`amend:` is `FIELD between MIN and MAX` in whole units, such as `amend: amount between 0 and 485000`; got %q", part)
				continue
			}
			lo, err1 := strconv.ParseInt(am[2], 10, 64)
			hi, err2 := strconv.ParseInt(am[3], 10, 64)
			if err1 != nil || err2 != nil {
				p.d.errorf(vpos, CodeBadSetting, "the bounds of `amend: %s` are too large", am[1])
				continue
			}
			if lo > hi {
				p.d.errorf(vpos, CodeBadSetting, "`amend: %s between %d and %d`: the lower bound is above the upper", am[1], lo, hi)
			}
			a.amend = append(a.amend, amendSpec{field: am[1], min: lo, max: hi, pos: vpos})
		}
	}
	_ = pos
}

// nearest returns the candidate within edit distance 2 of w, or "".
func nearest(w string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		if d := editDistance(w, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
