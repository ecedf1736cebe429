package service_test

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
)

// A PromQL evaluator for the instant-vector subset the alert rules use:
// selectors with = matchers, sum/max/min by (labels), comparison with a
// number (a filter), and `and`/`unless` with on (labels). It follows
// Prometheus' semantics for these; anything else is an error, so a rule
// that outgrows it fails the test instead of being misread. (The
// Prometheus engine itself is not a dependency of this module.)

type promSample struct {
	name   string
	labels map[string]string
	value  float64
}

type promVec []promSample

type promParser struct {
	toks []string
	pos  int
	data []promSample
}

func promEval(expr string, data []promSample) (promVec, error) {
	p := &promParser{toks: promLex(expr), data: data}
	v, err := p.setOp()
	if err != nil {
		return nil, err
	}
	if p.pos != len(p.toks) {
		return nil, fmt.Errorf("unexpected %q", p.toks[p.pos])
	}
	return v, nil
}

func promLex(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		c := rune(s[i])
		switch {
		case unicode.IsSpace(c):
			i++
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			out = append(out, s[i:i+j+2])
			i += j + 2
		case strings.ContainsRune("(){},", c):
			out = append(out, string(c))
			i++
		case strings.ContainsRune("<>=!", c):
			j := i + 1
			if j < len(s) && s[j] == '=' {
				j++
			}
			out = append(out, s[i:j])
			i = j
		default:
			j := i
			for j < len(s) && (unicode.IsLetter(rune(s[j])) || unicode.IsDigit(rune(s[j])) || s[j] == '_' || s[j] == '.' || s[j] == ':') {
				j++
			}
			if j == i {
				j++
			}
			out = append(out, s[i:j])
			i = j
		}
	}
	return out
}

func (p *promParser) peek() string {
	if p.pos < len(p.toks) {
		return p.toks[p.pos]
	}
	return ""
}

func (p *promParser) next() string { t := p.peek(); p.pos++; return t }

func (p *promParser) expect(t string) error {
	if got := p.next(); got != t {
		return fmt.Errorf("want %q, got %q", t, got)
	}
	return nil
}

func (p *promParser) labelList() ([]string, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var out []string
	for p.peek() != ")" {
		out = append(out, p.next())
		if p.peek() == "," {
			p.next()
		}
	}
	p.next()
	return out, nil
}

// setOp: cmp { (and|unless) [on (labels)] cmp }
func (p *promParser) setOp() (promVec, error) {
	left, err := p.cmp()
	if err != nil {
		return nil, err
	}
	for p.peek() == "and" || p.peek() == "unless" {
		op := p.next()
		if p.next() != "on" {
			return nil, fmt.Errorf("%s without on (...) is not supported here", op)
		}
		on, err := p.labelList()
		if err != nil {
			return nil, err
		}
		right, err := p.cmp()
		if err != nil {
			return nil, err
		}
		key := func(s promSample) string {
			var b strings.Builder
			for _, l := range on {
				b.WriteString(l + "=" + s.labels[l] + ",")
			}
			return b.String()
		}
		in := map[string]bool{}
		for _, s := range right {
			in[key(s)] = true
		}
		var out promVec
		for _, s := range left {
			if in[key(s)] == (op == "and") {
				out = append(out, s)
			}
		}
		left = out
	}
	return left, nil
}

// cmp: primary [ (>|<|>=|<=|==|!=) number ]
func (p *promParser) cmp() (promVec, error) {
	v, err := p.primary()
	if err != nil {
		return nil, err
	}
	switch op := p.peek(); op {
	case ">", "<", ">=", "<=", "==", "!=":
		p.next()
		n, err := strconv.ParseFloat(p.next(), 64)
		if err != nil {
			return nil, fmt.Errorf("comparison with a non-number: %v", err)
		}
		var out promVec
		for _, s := range v {
			keep := map[string]bool{">": s.value > n, "<": s.value < n, ">=": s.value >= n, "<=": s.value <= n, "==": s.value == n, "!=": s.value != n}[op]
			if keep {
				out = append(out, s)
			}
		}
		return out, nil
	}
	return v, nil
}

func (p *promParser) primary() (promVec, error) {
	t := p.next()
	switch {
	case t == "(":
		v, err := p.setOp()
		if err != nil {
			return nil, err
		}
		return v, p.expect(")")
	case t == "max" || t == "min" || t == "sum":
		if p.next() != "by" {
			return nil, fmt.Errorf("%s without by (...) is not supported here", t)
		}
		by, err := p.labelList()
		if err != nil {
			return nil, err
		}
		if err := p.expect("("); err != nil {
			return nil, err
		}
		inner, err := p.setOp()
		if err != nil {
			return nil, err
		}
		if err := p.expect(")"); err != nil {
			return nil, err
		}
		groups := map[string]*promSample{}
		var order []string
		for _, s := range inner {
			ls := map[string]string{}
			var k strings.Builder
			for _, l := range by {
				if v, ok := s.labels[l]; ok {
					ls[l] = v
				}
				k.WriteString(l + "=" + s.labels[l] + ",")
			}
			g := groups[k.String()]
			if g == nil {
				groups[k.String()] = &promSample{labels: ls, value: s.value}
				order = append(order, k.String())
				continue
			}
			switch t {
			case "max":
				g.value = max(g.value, s.value)
			case "min":
				g.value = min(g.value, s.value)
			case "sum":
				g.value += s.value
			}
		}
		var out promVec
		for _, k := range order {
			out = append(out, *groups[k])
		}
		return out, nil
	default:
		name := t
		match := map[string]string{}
		if p.peek() == "{" {
			p.next()
			for p.peek() != "}" {
				l := p.next()
				if err := p.expect("="); err != nil {
					return nil, fmt.Errorf("matcher on %s: only = is supported here", l)
				}
				match[l] = strings.Trim(p.next(), `"`)
				if p.peek() == "," {
					p.next()
				}
			}
			p.next()
		}
		var out promVec
	samples:
		for _, s := range p.data {
			if s.name != name {
				continue
			}
			for l, v := range match {
				if s.labels[l] != v {
					continue samples
				}
			}
			out = append(out, s)
		}
		return out, nil
	}
}

// parseExposition reads the samples of a Prometheus text exposition.
func parseExposition(text string) ([]promSample, error) {
	var out []promSample
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		s := promSample{labels: map[string]string{}}
		rest := line
		if i := strings.IndexByte(line, '{'); i >= 0 {
			s.name = line[:i]
			j := strings.LastIndexByte(line, '}')
			for _, kv := range splitLabels(line[i+1 : j]) {
				k, v, _ := strings.Cut(kv, "=")
				s.labels[k] = strings.Trim(v, `"`)
			}
			rest = line[j+1:]
		} else {
			s.name, rest, _ = strings.Cut(line, " ")
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("sample without value: %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("sample %q: %v", line, err)
		}
		s.value = v
		out = append(out, s)
	}
	return out, nil
}

// splitLabels splits a label set at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	in := false
	start := 0
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			in = !in
		case ',':
			if !in {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
