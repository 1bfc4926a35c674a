package runtime

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// GET /v1/status at thousands of tasks: its answer lists every task with its restores, about
// 150 bytes a task and 400 more per store restore (BenchmarkStatusSize). The query parameters
// below ask for less; without them the answer is the whole list, as before.
//
//	summary=true        no task list ("tasks": []), and "summary": the tasks counted per state
//	                    and processor, and the restores in progress summed (StatusSummary)
//	state=S             only the tasks in state S: restoring, running or standby
//	processor=P         only the tasks of processor P
//	limit=N             at most N tasks, from the start of the list or after the task "after"
//	after=P/N           the tasks that follow processor P's partition N (the list is sorted by
//	                    processor, then partition): the "next" of the previous page
//
// A filtered or paged answer has "page": the tasks that match, and "next", the value of after
// for the next page (absent on the last one). The summary counts every task, whatever the
// filters.

// StatusSummary sums up the tasks of GET /v1/status?summary=true.
type StatusSummary struct {
	Tasks      int                       `json:"tasks"`
	States     map[string]int            `json:"states"`     // tasks per state
	Processors map[string]map[string]int `json:"processors"` // processor -> state -> tasks
	// Restores are the store restores in progress (a standby's never ends, and is not
	// counted), RestoreLag their changelog lag summed, and ETASeconds the longest time one of
	// them has left: 0 when none runs, -1 when one's is unknown.
	Restores   int     `json:"restores"`
	RestoreLag int64   `json:"restore_lag"`
	ETASeconds float64 `json:"eta_seconds"`
}

// StatusPage says which part of the task list a filtered or paged GET /v1/status answered.
type StatusPage struct {
	Total int    `json:"total"`          // the tasks that match the filters
	Next  string `json:"next,omitempty"` // the after of the next page; absent on the last
}

// statusQuery is what the query parameters of GET /v1/status ask for.
type statusQuery struct {
	summary   bool
	state     string
	processor string
	limit     int // 0: no limit
	after     *taskID
}

// paged reports whether the answer is a part of the task list.
func (q statusQuery) paged() bool {
	return q.state != "" || q.processor != "" || q.limit > 0 || q.after != nil
}

// parseStatusQuery reads the query parameters of GET /v1/status.
func parseStatusQuery(v url.Values) (statusQuery, error) {
	var q statusQuery
	if s := v.Get("summary"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			return q, fmt.Errorf("summary=%q: want true or false", s)
		}
		q.summary = b
	}
	q.state, q.processor = v.Get("state"), v.Get("processor")
	if q.state != "" && !slices.Contains(taskStates, q.state) {
		return q, fmt.Errorf("state=%q: want one of %s", q.state, strings.Join(taskStates, ", "))
	}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return q, fmt.Errorf("limit=%q: want a number of tasks, 1 or more", s)
		}
		q.limit = n
	}
	if s := v.Get("after"); s != "" {
		i := strings.LastIndexByte(s, '/')
		p, err := strconv.ParseInt(s[i+1:], 10, 32)
		if i <= 0 || err != nil || p < 0 {
			return q, fmt.Errorf("after=%q: want processor/partition, the next of the previous page", s)
		}
		q.after = &taskID{Processor: s[:i], Partition: int32(p)}
	}
	return q, nil
}

// errStatusQuery wraps the errors of parseStatusQuery: a 400.
var errStatusQuery = errors.New("runtime: bad status query")

// statusFor returns Status narrowed by q.
func (r *Runtime) statusFor(q statusQuery) Status { return narrowStatus(r.Status(), q) }

// narrowStatus narrows st, the whole status, by q.
func narrowStatus(st Status, q statusQuery) Status {
	if q.summary {
		st.Summary = summarize(st.Tasks)
		st.Tasks = []TaskStatus{}
		return st
	}
	if !q.paged() {
		return st
	}
	out := st.Tasks[:0]
	page := &StatusPage{}
	for _, ts := range st.Tasks {
		if q.state != "" && ts.State != q.state || q.processor != "" && ts.Processor != q.processor {
			continue
		}
		page.Total++
		if q.after != nil && (ts.Processor < q.after.Processor || ts.Processor == q.after.Processor && ts.Partition <= q.after.Partition) {
			continue
		}
		if q.limit > 0 && len(out) == q.limit {
			if page.Next == "" {
				last := out[len(out)-1]
				page.Next = fmt.Sprintf("%s/%d", last.Processor, last.Partition)
			}
			continue
		}
		out = append(out, ts)
	}
	st.Tasks, st.Page = out, page
	return st
}

// summarize counts tasks per state and processor and sums up their restores in progress.
func summarize(tasks []TaskStatus) *StatusSummary {
	s := &StatusSummary{Tasks: len(tasks), States: map[string]int{}, Processors: map[string]map[string]int{}}
	for _, st := range taskStates {
		s.States[st] = 0
	}
	for _, ts := range tasks {
		s.States[ts.State]++
		byState := s.Processors[ts.Processor]
		if byState == nil {
			byState = map[string]int{}
			s.Processors[ts.Processor] = byState
		}
		byState[ts.State]++
		if ts.State == "standby" {
			continue
		}
		for _, rs := range ts.Restores {
			if rs.Done {
				continue
			}
			s.Restores++
			s.RestoreLag += max(rs.Lag, 0)
			switch {
			case s.ETASeconds < 0:
			case rs.ETASeconds < 0:
				s.ETASeconds = -1
			default:
				s.ETASeconds = max(s.ETASeconds, rs.ETASeconds)
			}
		}
	}
	return s
}
