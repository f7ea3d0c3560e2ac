package pull

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// journal is a listener's file of outcomes the local app gave and the
// gateway has not yet been told: one JSON line per outcome, and one per
// ack that landed. An outcome answers only the delivery's next attempt
// (the one handed out again once the lease of the killed listener's
// ended): an ack that landed before the kill could write its done line
// leaves an outcome behind, and the delivery's later life (a replay, whose
// attempts count from 1 again) must reach the app, not this old answer. A write reaches the kernel before the ack is sent, so
// a listener killed between the two (SIGKILL) finds it when it starts
// again; a machine that loses power may lose the last lines, and then
// that delivery is forwarded again, under the same Idempotency-Key.
type journal struct {
	f       *os.File
	w       *bufio.Writer
	pending map[string]journaled
	lines   int
}

// journaled is an outcome kept, with the attempt it answered.
type journaled struct {
	ack     AckBody
	attempt int
}

type journalLine struct {
	ID      string   `json:"id"`
	Attempt int      `json:"attempt,omitempty"`
	Ack     *AckBody `json:"ack,omitempty"`
	Done    bool     `json:"done,omitempty"`
}

// compactAfter is how many lines the file may hold before it is written
// again with only the pending outcomes.
const compactAfter = 10000

// openJournal reads the outcomes pending in path, and keeps it open,
// locked, for this listener alone.
func openJournal(path string) (*journal, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("journal: %w", err)
	}
	if err := lock(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("journal %s is another listener's (%w): give this one its own (--journal)", path, err)
	}
	j := &journal{f: f, pending: map[string]journaled{}}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var l journalLine
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue // a line cut by a kill
		}
		if l.Done {
			delete(j.pending, l.ID)
		} else if l.Ack != nil && l.Attempt > 0 {
			j.pending[l.ID] = journaled{*l.Ack, l.Attempt}
		}
	}
	if err := j.compact(); err != nil {
		f.Close()
		return nil, err
	}
	return j, nil
}

// compact writes the file again with only the pending outcomes.
func (j *journal) compact() error {
	if err := j.f.Truncate(0); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	if _, err := j.f.Seek(0, 0); err != nil {
		return fmt.Errorf("journal: %w", err)
	}
	j.w, j.lines = bufio.NewWriter(j.f), 0
	for id, a := range j.pending {
		j.write(journalLine{ID: id, Attempt: a.attempt, Ack: &a.ack})
	}
	return j.w.Flush()
}

func (j *journal) write(l journalLine) {
	b, _ := json.Marshal(l)
	j.w.Write(append(b, '\n'))
	j.lines++
}

// add keeps a, the outcome of id's attempt, written to the kernel before
// it returns.
func (j *journal) add(id string, attempt int, a AckBody) {
	j.pending[id] = journaled{a, attempt}
	j.write(journalLine{ID: id, Attempt: attempt, Ack: &a})
	j.w.Flush()
}

// answer is the outcome kept for id's attempt: one kept for the attempt
// before it, which the gateway hands out again when that attempt's lease
// ends unacked.
func (j *journal) answer(id string, attempt int) (AckBody, bool) {
	a, ok := j.pending[id]
	if !ok || attempt != a.attempt+1 {
		return AckBody{}, false
	}
	return a.ack, true
}

// done forgets id's outcome: the gateway has it.
func (j *journal) done(id string) {
	if _, ok := j.pending[id]; !ok {
		return
	}
	delete(j.pending, id)
	j.write(journalLine{ID: id, Done: true})
	j.w.Flush()
	if j.lines > compactAfter {
		j.compact()
	}
}

func (j *journal) close() { j.w.Flush(); j.f.Close() }
