package runtime

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/statehost/statehost/internal/windowtest"
	"github.com/statehost/statehost/internal/wordgen"
)

// The web console (host/console) in a real browser: headless Chromium driven by chromedp,
// against a runtime on kfake. The tests skip when no Chromium is installed (Debian's package
// chromium; STATEHOST_CHROMIUM names another binary). When one fails, a screenshot and the
// page's HTML are kept in $STATEHOST_TEST_ARTIFACTS (default: a new directory under the
// system's temporary directory), named in the failure.

// consoleHCL runs the word count (wordcountHCL) and windowed counts, with the admin listener
// on a free port and the admin token token ("": none).
func consoleHCL(token string) string {
	admin := `admin { listen = "127.0.0.1:0" }`
	if token != "" {
		admin = fmt.Sprintf("admin {\n  listen = \"127.0.0.1:0\"\n  token  = %q\n}", token)
	}
	return strings.Replace(fmt.Sprintf(wordcountHCL, "pebble", true), `admin { listen = "" }`, admin, 1) + `
topic "clicks" {
  partitions = 1
}
processor "wc" {
  module  = "{{windowcount}}"
  inputs  = ["clicks"]
  outputs = ["window-counts"]
  store "windows" {
    type        = "window"
    window_size = "10s"
    grace       = "1s"
  }
}
`
}

// page is a browser tab on the console of an instance.
type page struct {
	t   *testing.T
	ctx context.Context

	mu         sync.Mutex
	exceptions []string // the page's uncaught JavaScript errors
}

// chromium returns the Chromium binary, or skips the test when there is none.
func chromium(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("STATEHOST_CHROMIUM")
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if bin != "" {
			break
		}
		bin, _ = exec.LookPath(name)
	}
	if bin == "" {
		t.Skip("no Chromium: the console's browser tests need Debian's chromium package (apt-get install chromium), or STATEHOST_CHROMIUM")
	}
	return bin
}

// openConsole starts the headless Chromium bin with a tab on the console of in. On failure it
// keeps a screenshot and the page's HTML.
func openConsole(t *testing.T, bin string, in *instance) *page {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox, chromedp.WindowSize(1280, 1000))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	t.Cleanup(cancelAlloc)
	t.Cleanup(cancelTab)
	p := &page{t: t, ctx: ctx}
	if err := chromedp.Do(ctx); err != nil { // starts the browser, for the life of ctx
		t.Fatalf("start %s: %v", bin, err)
	}
	if err := chromedp.Listen(ctx, func(ev any) {
		if e, ok := ev.(*runtime.EventExceptionThrown); ok {
			p.mu.Lock()
			d := e.ExceptionDetails
			msg := fmt.Sprintf("%s at %s:%d:%d", d.Text, d.URL, d.LineNumber+1, d.ColumnNumber+1)
			if d.Exception != nil {
				msg += ": " + d.Exception.Description
			}
			p.exceptions = append(p.exceptions, msg)
			p.mu.Unlock()
		}
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before the browser closes: cleanups run last first
		if t.Failed() {
			p.keep()
		}
	})
	p.do(chromedp.Navigate("http://" + in.rt.local.adminAddr() + "/"))
	return p
}

// keep writes a screenshot and the HTML of the page where the failure message says.
func (p *page) keep() {
	dir := os.Getenv("STATEHOST_TEST_ARTIFACTS")
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "statehost-console-"); err != nil {
			p.t.Logf("no directory for the screenshot: %v", err)
			return
		}
	}
	base := filepath.Join(dir, regexp.MustCompile(`[^A-Za-z0-9_.-]+`).ReplaceAllString(p.t.Name(), "_"))
	ctx, cancel := context.WithTimeout(p.ctx, 10*time.Second)
	defer cancel()
	if png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)); err == nil {
		_ = os.MkdirAll(dir, 0o755)
		if err := os.WriteFile(base+".png", png, 0o644); err == nil {
			p.t.Logf("screenshot of the console: %s.png", base)
		}
	}
	if html, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html"))); err == nil && os.WriteFile(base+".html", []byte(html), 0o644) == nil {
		p.t.Logf("HTML of the console: %s.html", base)
	}
}

// do runs browser actions, failing the test on an error.
func (p *page) do(actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("browser: %v", err)
	}
}

// eval evaluates a JavaScript expression (a promise is awaited) into v.
func (p *page) eval(expr string, v any) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, 30*time.Second)
	defer cancel()
	raw, err := chromedp.Run(ctx, chromedp.Evaluate[[]byte](expr, chromedp.EvalAwaitPromise))
	if err == nil {
		err = json.Unmarshal(raw, v)
	}
	if err != nil {
		p.t.Fatalf("evaluating %s: %v", expr, err)
	}
}

// waitTrue polls the JavaScript expression until it is true.
func (p *page) waitTrue(what, expr string) {
	p.t.Helper()
	deadline := time.Now().Add(45 * time.Second)
	for {
		var ok bool
		p.eval("!!("+expr+")", &ok)
		if ok {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("timed out waiting for %s (%s)", what, expr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// column returns the text of column col of the rows of a table.
func (p *page) column(table string, col int) []string {
	p.t.Helper()
	var out []string
	p.eval(fmt.Sprintf(`Array.from(document.querySelectorAll('#%s tbody tr'), tr => tr.cells[%d].textContent)`, table, col), &out)
	return out
}

// set gives a form field a value, as a user's change does.
func (p *page) set(id, value string) {
	p.t.Helper()
	v, _ := json.Marshal(value)
	var ok bool
	p.eval(fmt.Sprintf(`(() => { const e = document.getElementById(%q); e.value = %s;
		e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return true })()`, id, v), &ok)
}

// text returns the text of the element id.
func (p *page) text(id string) string {
	p.t.Helper()
	var s string
	p.eval(fmt.Sprintf(`document.getElementById(%q).textContent`, id), &s)
	return s
}

// shows fails the test unless the form fields ids are shown, and those with a leading "!"
// hidden, when the form is for what.
func (p *page) shows(what string, ids ...string) {
	p.t.Helper()
	for _, id := range ids {
		want := !strings.HasPrefix(id, "!")
		id = strings.TrimPrefix(id, "!")
		var shown bool
		p.eval(fmt.Sprintf(`document.getElementById(%q).getClientRects().length > 0`, id), &shown)
		if shown != want {
			p.t.Errorf("the form for %s: %s shown %v, want %v", what, id, shown, want)
		}
	}
}

// noExceptions fails the test on an uncaught error of the page's JavaScript.
func (p *page) noExceptions() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.exceptions {
		p.t.Errorf("JavaScript error in the console: %s", e)
	}
}

// query fills the store form and runs it, and waits for the answer.
func (p *page) query(fields map[string]string) {
	p.t.Helper()
	for _, id := range []string{"q-key", "q-prefix", "q-from", "q-to", "q-from-time", "q-to-time", "q-partition"} {
		p.set(id, fields[id])
	}
	for _, id := range []string{"store-select", "q-mode", "q-limit"} {
		if v, ok := fields[id]; ok {
			p.set(id, v)
		}
	}
	var cleared bool
	p.eval(`(() => { document.getElementById('store-msg').textContent = ''; return true })()`, &cleared)
	p.do(chromedp.Click(chromedp.ID("#q-submit")))
	p.waitTrue("the store's answer", `!['', 'reading…'].includes(document.getElementById('store-msg').textContent)`)
}

// TestConsoleInBrowser: the console of a running word count and windowed count, without a
// token: the tasks table shows every task running, a page at a time; the processors and the
// figures show; the store browser finds a real key's value (as text and as hex), pages
// through a range to exactly the store's keys, keeps only a prefix's keys, and shows a
// window store's windows with their times.
func TestConsoleInBrowser(t *testing.T) {
	bin := chromium(t)
	brokers := cluster(t)
	in := start(t, loadConfig(t, t.TempDir(), consoleHCL("")), brokers, func(o *Options) { o.NoWatch = true })
	cl, _ := client(t, brokers)
	lines, ref := wordgen.Sentences(30, 5)
	produce(t, cl, "sentences", lines...)
	const base = int64(1_700_000_000_000)
	windowtest.Produce(t, cl, "clicks", []windowtest.Event{{Key: "k", TS: base}, {Key: "k", TS: base + 10}, {Key: "j", TS: base + 20}})
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))

	p := openConsole(t, bin, in)
	p.waitTrue("8 running tasks", `document.querySelectorAll('#tasks tbody tr').length === 8 &&
		Array.from(document.querySelectorAll('#tasks tbody tr'), tr => tr.cells[2].textContent).every(s => s === 'running')`)
	if got := p.column("tasks", 0); !slices.Equal(got, []string{"count", "count", "count", "tokenize", "tokenize", "tokenize", "tokenize", "wc"}) {
		t.Errorf("the tasks' processors: %v", got)
	}
	if got := p.text("fig-tasks"); got != "8" {
		t.Errorf("the tasks figure: %q, want 8", got)
	}
	if got := p.column("processors", 0); !slices.Equal(got, []string{"tokenize", "count", "wc"}) {
		t.Errorf("the processors: %v", got)
	}
	// Records processed while the page samples the metrics: the charts get their points.
	feed(t, cl, ref, 30, 6)
	waitCounts(t, brokers, "word-counts", wordgen.Strings(ref))
	p.waitTrue("a point on each chart", `document.getElementById('chart-rate').dataset.points >= 1 && document.getElementById('chart-commit').dataset.points >= 1`)
	if ms := p.text("fig-commit"); !regexp.MustCompile(`^[0-9.]+ (ms|s)$`).MatchString(ms) {
		t.Errorf("the commit latency: %q, want a duration", ms)
	}

	// The tasks, 3 a page.
	p.set("task-limit", "3")
	p.waitTrue("3 tasks a page", `document.querySelectorAll('#tasks tbody tr').length === 3`)
	var seen []string
	for pg := 1; ; pg++ {
		p.waitTrue(fmt.Sprintf("page %d of the tasks", pg), fmt.Sprintf(`document.getElementById('tasks-page').textContent.startsWith('page %d ')`, pg))
		p.waitTrue("the page's rows", `document.querySelectorAll('#tasks tbody tr').length > 0`)
		var rows []string
		p.eval(`Array.from(document.querySelectorAll('#tasks tbody tr'), tr => tr.dataset.task)`, &rows)
		seen = append(seen, rows...)
		var last bool
		p.eval(`document.getElementById('tasks-next').disabled`, &last)
		if last {
			break
		}
		if len(rows) != 3 || pg > 3 {
			t.Fatalf("page %d of the tasks: %v", pg, rows)
		}
		p.do(chromedp.Click(chromedp.ID("#tasks-next")))
	}
	want := []string{"count/0", "count/1", "count/2", "tokenize/0", "tokenize/1", "tokenize/2", "tokenize/3", "wc/0"}
	if !slices.Equal(seen, want) {
		t.Errorf("the tasks, 3 a page: %v, want %v", seen, want)
	}

	// The store browser: a key's value.
	p.do(chromedp.Click(chromedp.ID("#nav-stores")))
	p.waitTrue("the stores", `document.querySelectorAll('#store-select option').length === 2`)
	words := slices.Sorted(func(yield func(string) bool) {
		for w := range ref {
			if !yield(w) {
				return
			}
		}
	})
	word := words[len(words)/2]
	p.query(map[string]string{"store-select": "counts", "q-mode": "key", "q-key": word})
	p.shows("a key-value store, by key", "q-key", "q-partition", "!q-prefix", "!q-from", "!q-from-time")
	if got := p.column("entries", 1); !slices.Equal(got, []string{word}) {
		t.Fatalf("looking up %q: keys %v, message %q", word, got, p.text("store-msg"))
	}
	if got, want := p.column("entries", 4), strconv.Itoa(ref[word]); !slices.Equal(got, []string{want}) {
		t.Errorf("the value of %q: %v, want %s", word, got, want)
	}
	p.do(chromedp.Click(chromedp.ID("#enc-hex")))
	hex := strings.TrimSpace(fmt.Sprintf("% x", strconv.Itoa(ref[word])))
	if got := p.column("entries", 4); !slices.Equal(got, []string{hex}) {
		t.Errorf("the value of %q in hex: %v, want %s", word, got, hex)
	}
	p.do(chromedp.Click(chromedp.ID("#enc-text")))
	p.query(map[string]string{"q-key": "no such word"})
	if got := p.column("entries", 1); len(got) != 0 || !strings.Contains(p.text("store-msg"), "no key") {
		t.Errorf("an absent key: rows %v, message %q", got, p.text("store-msg"))
	}

	// A range, 10 a page, gives every key once, in order, with its count.
	p.query(map[string]string{"q-mode": "range", "q-limit": "10"})
	p.shows("a key-value store, by range", "!q-key", "q-prefix", "q-from", "q-to", "!q-from-time")
	var keys []string
	for pg := 1; pg < 100; pg++ {
		p.waitTrue(fmt.Sprintf("page %d of the range", pg), fmt.Sprintf(`document.getElementById('entries-page').textContent === 'page %d'`, pg))
		k, v := p.column("entries", 1), p.column("entries", 4)
		for i := range k {
			if v[i] != strconv.Itoa(ref[k[i]]) {
				t.Errorf("range: %s = %s, want %d", k[i], v[i], ref[k[i]])
			}
		}
		keys = append(keys, k...)
		var last bool
		p.eval(`document.getElementById('entries-next').disabled`, &last)
		if last {
			break
		}
		if len(k) != 10 {
			t.Fatalf("page %d of the range: %d keys and a next page", pg, len(k))
		}
		p.do(chromedp.Click(chromedp.ID("#entries-next")))
	}
	slices.Sort(keys)
	if !slices.Equal(keys, words) {
		t.Errorf("the range's keys in pages of 10: %d keys, want the %d words", len(keys), len(words))
	}
	prefix := word[:1]
	p.query(map[string]string{"q-prefix": prefix, "q-limit": "1000"})
	var withPrefix []string
	for _, w := range words {
		if strings.HasPrefix(w, prefix) {
			withPrefix = append(withPrefix, w)
		}
	}
	got := p.column("entries", 1)
	slices.Sort(got)
	if !slices.Equal(got, withPrefix) {
		t.Errorf("prefix %q: %v, want %v", prefix, got, withPrefix)
	}

	// A window store: the windows of k, then every window.
	p.query(map[string]string{"store-select": "windows", "q-key": "k"})
	p.shows("a window store", "q-key", "q-from-time", "q-to-time", "!q-mode", "!q-prefix", "!q-from")
	start := time.UnixMilli(base).UTC().Format("2006-01-02T15:04:05.000Z")
	if k, s, v := p.column("entries", 1), p.column("entries", 2), p.column("entries", 4); !slices.Equal(k, []string{"k"}) ||
		!slices.Equal(s, []string{start}) || !slices.Equal(v, []string{"2"}) {
		t.Errorf("the windows of k: keys %v, starts %v, values %v; want k from %s, 2", k, s, v, start)
	}
	p.query(map[string]string{"q-key": "", "q-from-time": strconv.FormatInt(base, 10)})
	if k := p.column("entries", 1); len(k) != 2 {
		t.Errorf("every window from %d: %v, want j's and k's", base, k)
	}
	p.noExceptions()
}

// TestConsoleToken: with admin.token, the page loads and asks for the token; without it
// every data call fails (401) and nothing shows; a wrong token is refused; with the right one
// the tasks and a store's values show. The token is kept in no storage and no cookie, and a
// reload asks for it again.
func TestConsoleToken(t *testing.T) {
	bin := chromium(t)
	brokers := cluster(t)
	in := start(t, loadConfig(t, t.TempDir(), consoleHCL("s3cret-t0ken")), brokers, func(o *Options) { o.NoWatch = true })
	cl, _ := client(t, brokers)
	produce(t, cl, "sentences", "the cat the end")
	waitCounts(t, brokers, "word-counts", map[string]string{"the": "2", "cat": "1", "end": "1"})

	p := openConsole(t, bin, in)
	p.waitTrue("the token prompt", `document.getElementById('token-dialog').open`)
	var codes []int
	p.eval(`Promise.all(['/v1/status', '/v1/processors', '/v1/stores', '/v1/stores/counts/keys/the', '/metrics'].map(u => fetch(u).then(r => r.status)))`, &codes)
	if !slices.Equal(codes, []int{401, 401, 401, 401, 401}) {
		t.Errorf("the API without the token: %v, want 401 each", codes)
	}
	if rows := p.column("tasks", 0); len(rows) != 0 {
		t.Errorf("tasks shown without the token: %v", rows)
	}

	p.do(chromedp.SendKeys(chromedp.ID("#token-input"), "wrong"), chromedp.Click(chromedp.ID("#token-submit")))
	p.waitTrue("the prompt again, for a wrong token", `document.getElementById('token-dialog').open &&
		document.getElementById('token-msg').textContent.startsWith('Wrong token')`)
	p.do(chromedp.SendKeys(chromedp.ID("#token-input"), "s3cret-t0ken"), chromedp.Click(chromedp.ID("#token-submit")))
	p.waitTrue("8 tasks with the token", `!document.getElementById('token-dialog').open && document.querySelectorAll('#tasks tbody tr').length === 8`)

	p.do(chromedp.Click(chromedp.ID("#nav-stores")))
	p.waitTrue("the stores", `document.querySelectorAll('#store-select option').length === 2`)
	p.query(map[string]string{"store-select": "counts", "q-mode": "key", "q-key": "the"})
	if got := p.column("entries", 4); !slices.Equal(got, []string{"2"}) {
		t.Errorf("the value of the with the token: %v (%q), want 2", got, p.text("store-msg"))
	}
	var stored string
	p.eval(`JSON.stringify([localStorage.length, sessionStorage.length, document.cookie])`, &stored)
	if stored != `[0,0,""]` {
		t.Errorf("local storage, session storage and cookies: %s, want nothing kept", stored)
	}
	p.do(chromedp.Reload())
	p.waitTrue("the token prompt after a reload", `document.getElementById('token-dialog').open`)
	p.noExceptions()
}
