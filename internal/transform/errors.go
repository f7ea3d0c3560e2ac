package transform

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"modernc.org/quickjs"
)

// Kind says why a run failed.
type Kind string

const (
	KindSyntax  Kind = "syntax"  // the script does not compile
	KindRuntime Kind = "runtime" // it threw
	KindTimeout Kind = "timeout" // it ran past its time limit
	KindMemory  Kind = "memory"  // it allocated past its memory limit
	KindStack   Kind = "stack"   // it recursed past the call-depth limit
	KindOutput  Kind = "output"  // what it asked to send is over the output limit
	KindInvalid Kind = "invalid" // what it returned cannot be sent (another host, a header HTTP cannot carry, ...)
	KindEnv     Kind = "env"     // it reads a process.env name its destination's transform.env does not set
)

// Error is a script's failure: the event's problem, never the gateway's. Its text names the script's file
// and line ("transforms/capi.js:12:7: TypeError: ...") wherever the engine says where.
type Error struct {
	Script  string
	Line    int // 0: unknown
	Column  int
	Kind    Kind
	Message string
	Took    time.Duration
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Script)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	switch e.Kind {
	case KindSyntax:
		if !strings.HasPrefix(e.Message, "SyntaxError") {
			b.WriteString("syntax error: ")
		}
	case KindTimeout:
		b.WriteString("time limit: ")
	case KindMemory:
		b.WriteString("memory limit: ")
	case KindStack:
		b.WriteString("call depth limit: ")
	case KindOutput:
		b.WriteString("output limit: ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// frame is one line of a QuickJS stack: "    at name (<eval>:12:7)".
var frame = regexp.MustCompile(`at (\S+) \(<eval>:(\d+)(?::(\d+))?\)`)

// scriptError turns the engine's error into an *Error at the script's own line: the first frame of the
// stack that is the script's (the sandbox's functions are all named __oncehook_*, but the script's top level
// runs as __oncehook_factory).
func (s *Script) scriptError(kind Kind, err error, took time.Duration) *Error {
	e := &Error{Script: s.name, Kind: kind, Took: took, Message: err.Error()}
	var qe *quickjs.Error
	if !errors.As(err, &qe) {
		return e
	}
	msg := qe.Message
	if qe.Name != "" {
		msg = qe.Name + ": " + qe.Message
	}
	if msg != ": " && msg != "" {
		e.Message = msg
	}
	switch kind {
	case KindTimeout:
		e.Message = fmt.Sprintf("the run took over %s", s.opts.Timeout)
	case KindMemory:
		e.Message = fmt.Sprintf("the run allocated over %d MiB (%s)", s.opts.MaxMemory>>20, msg)
	case KindStack:
		e.Message = "the calls went too deep (" + msg + ")"
	}
	if qe.LineNumber > 0 {
		e.Line, e.Column = qe.LineNumber, qe.ColumnNumber
	} else {
		for _, m := range frame.FindAllStringSubmatch(qe.Stack, -1) {
			if strings.HasPrefix(m[1], "__oncehook_") && m[1] != "__oncehook_factory" {
				continue
			}
			e.Line, _ = strconv.Atoi(m[2])
			if m[3] != "" {
				e.Column, _ = strconv.Atoi(m[3])
			}
			break
		}
	}
	if e.Line == 1 && e.Column > s.prefixCols {
		e.Column -= s.prefixCols
	}
	if kind == KindSyntax && s.lines > 0 && e.Line > s.lines {
		// In the wrapper's tail: the script ended before what it opened was closed.
		e.Line, e.Column = s.lines, 0
		e.Message += " at the end of the script (a {, ( or [ left open?)"
	}
	return e
}
