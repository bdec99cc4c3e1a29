package tests

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"adoption/codec"
	"adoption/workflows"
)

// TestWebUIShowsNodePhase looks at the Temporal Web UI as an operator would,
// in headless Chromium: the workflows list filtered by AdoptionPhase shows
// the adopted node (and not a workflow in another phase), and the node's
// workflow page shows its phase, its current details (modules migrated,
// next step), its summary and every activity's summary. The screenshots are
// kept under testdata/webui/ (gitignored).
//
// Every process holds a codec key (ADOPT_TEMPORAL_CODEC_KEY_FILE), so the
// history is stored encrypted, and the UI shows all of it decoded through
// the codec server (the dev server's --ui-codec-endpoint).
func TestWebUIShowsNodePhase(t *testing.T) {
	needE2E(t)
	chrome := chromiumBin(t)
	t.Setenv("ADOPT_TEMPORAL_CODEC_KEY_FILE", writeCodecKey(t, 0x3c))
	codecPort := freePort(t)
	srv, uiAddr := startDevServerWithUI(t, "--ui-codec-endpoint", fmt.Sprintf("http://127.0.0.1:%d", codecPort))
	n := upNode(t, "webui", 131, srv.Addr())
	startWorker(t, n) // current details are answered by a query: the worker must run
	out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg)
	if code != 0 {
		t.Fatalf("adopt start: exit %d\n%s%s", code, out, errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)

	// The phase the pages must show. (Set it to a phase the node is not in
	// and the test fails on every page.)
	want := string(workflows.PhaseAdopted)
	wfID := "node-migration/" + n.Name

	// A workflow in another phase: the filtered list must leave it out.
	c := srv.client(t)
	ctx := context.Background()
	const decoy = "webui-decoy"
	if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID: decoy, TaskQueue: "webui-decoy-nobody-polls",
		TypedSearchAttributes: temporal.NewSearchAttributes(
			workflows.AttrNode.ValueSet(decoy), workflows.AttrPhase.ValueSet(string(workflows.PhaseProbing))),
	}, "Decoy"); err != nil {
		t.Fatal(err)
	}
	desc, err := c.DescribeWorkflow(ctx, wfID, "")
	if err != nil {
		t.Fatal(err)
	}
	runID := desc.WorkflowExecution.RunID

	ui := newUIViewer(t, chrome, uiAddr)
	ns := ui.base + "/namespaces/default"
	// The browser calls the codec server from the page's origin: the proxy's.
	startCodecServer(t, os.Getenv("ADOPT_TEMPORAL_CODEC_KEY_FILE"), codecPort, ui.base)

	// What Temporal stores is ciphertext: what the pages show below came
	// through the codec server.
	shown, errOut, code := runCmd(t, srv.spec.Bin, "workflow", "show", "--workflow-id", wfID, "--address", srv.Addr(), "--output", "json")
	if code != 0 {
		t.Fatalf("temporal workflow show: %s", errOut)
	}
	if !readable(shown, codec.Encoding) || readable(shown, "adoption of node "+n.Name) || readable(shown, "probe the node (read-only)") {
		t.Fatalf("the stored history is not encrypted:\n%s", excerpt(shown, 3000))
	}
	// Nor can the declared and found contents be guessed from it: the
	// dictionary holds every one of them.
	var contents []string
	for _, c := range e2eFiles {
		contents = append(contents, c)
	}
	contents = append(contents, "APP_DB_PASSWORD=mesh\n")
	if hits := dictionaryHits(shown, contents...); len(hits) > 0 {
		t.Fatalf("the stored history gives away file contents: %v", hits)
	}

	// (0) The unfiltered list has both: the decoy is in visibility, so its
	// absence below is the filter's doing.
	ui.until(t, "list-all", ns+"/workflows", func(p uiPage) error {
		return p.has(wfID, decoy)
	})

	// (1) The list filtered by the search attribute, as docs/runbook.md tells
	// the operator to filter it.
	filter := fmt.Sprintf("AdoptionPhase=%q", want)
	ui.until(t, "list-phase", ns+"/workflows?query="+url.QueryEscape(filter), func(p uiPage) error {
		if err := p.has(wfID, "AdoptionPhase"); err != nil {
			return err
		}
		if p.contains(decoy) {
			return fmt.Errorf("the list filtered by %s shows %s (phase %s)", filter, decoy, workflows.PhaseProbing)
		}
		return nil
	})

	// (2) The workflow's page, User Metadata tab: summary, current details
	// (a markdown document the page renders in an iframe from
	// /render?content=...) and the summary of every activity run so far.
	wfPage := ns + "/workflows/" + url.PathEscape(wfID) + "/" + runID
	var details string
	ui.until(t, "workflow-metadata", wfPage+"/user-metadata", func(p uiPage) error {
		if err := p.has(wfID, "Running", "Summary", "Current Details",
			"probe the node (read-only)",
			"adopt: take custody of found files, keep the found firewall"); err != nil {
			return err
		}
		var summary bool
		details = ""
		for _, r := range p.rendered() {
			summary = summary || strings.Contains(r.content, "adoption of node "+n.Name)
			if strings.Contains(r.content, "**Node "+n.Name+"**") {
				details = r.src
				if !strings.Contains(r.content, "phase **"+want+"**") {
					return fmt.Errorf("current details do not say phase %s:\n%s", want, r.content)
				}
			}
		}
		if !summary {
			return fmt.Errorf("the page does not show the workflow's summary (rendered: %q)", p.rendered())
		}
		if details == "" {
			return fmt.Errorf("the page does not show node %s's current details (rendered: %q)", n.Name, p.rendered())
		}
		return nil
	})
	// The current details as the iframe renders them.
	ui.until(t, "workflow-details", ui.base+details, func(p uiPage) error {
		return p.has("Node "+n.Name+": phase "+want, "modules migrated: 0 of 1", "files in custody: 3", "Next step:")
	})

	// (3) The Search Attributes tab: the phase from visibility, which shows
	// whether a worker runs or not.
	ui.until(t, "workflow-search-attributes", wfPage+"/search-attributes", func(p uiPage) error {
		return p.has(fmt.Sprintf("%q: %q", "AdoptionPhase", want), fmt.Sprintf("%q: %q", "AdoptionNode", n.Name))
	})
}

// chromiumBin finds Debian's chromium ($ADOPT_CHROMIUM overrides).
func chromiumBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("ADOPT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium not found: the Web UI test needs Debian's chromium package (apt-get install -y chromium), or set ADOPT_CHROMIUM")
	return ""
}

// startDevServerWithUI is startDevServer with the Web UI on a free port
// (the harness's server is headless). It returns the server and the UI's
// address.
func startDevServerWithUI(t *testing.T, extra ...string) (*devServer, string) {
	t.Helper()
	uiPort := freePort(t)
	s := launchDevServer(t, uiPort, extra...)
	ui := fmt.Sprintf("http://127.0.0.1:%d", uiPort)
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if uiAnswers(ui) { // the server answers already (devserver.Launch)
			s.orch = startOrchestrator(t, s.Addr()) // the workflows' worker
			return s, ui
		}
		time.Sleep(200 * time.Millisecond)
	}
	b, _ := os.ReadFile(s.spec.Log)
	t.Fatalf("dev server on %s did not serve its Web UI on %s:\n%s", s.Addr(), ui, b)
	return nil, ""
}

func uiAnswers(ui string) bool {
	resp, err := http.Get(ui + "/")
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// uiViewer renders Web UI pages in headless Chromium: --dump-dom for the
// DOM after the page's scripts ran, --screenshot for a person to look at.
//
// Chromium ends a headless run when its virtual time budget is spent, and
// virtual time stands still while a request is in flight. A workflow page
// long-polls the workflow's history (…/history?waitNewEvent=true) for as
// long as the workflow runs, so Chromium would never finish. The viewer
// therefore goes through a reverse proxy that turns that long poll into a
// plain read (waitNewEvent=false): the page shows the history as it is,
// without live updates. Everything else passes through unchanged.
type uiViewer struct {
	chrome string
	base   string // the proxy's address: open pages here
	dir    string // artifacts
}

func newUIViewer(t *testing.T, chrome, uiAddr string) *uiViewer {
	t.Helper()
	target, err := url.Parse(uiAddr)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(target)
		r.Out.Host = r.In.Host
		if q := r.Out.URL.Query(); q.Get("waitNewEvent") == "true" {
			q.Set("waitNewEvent", "false")
			r.Out.URL.RawQuery = q.Encode()
		}
	}}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	dir, err := filepath.Abs(filepath.Join("testdata", "webui"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &uiViewer{chrome: chrome, base: srv.URL, dir: dir}
}

// uiPage is one rendering of a page.
type uiPage struct {
	url, dom, text, shot string
}

var (
	reHidden = []*regexp.Regexp{
		regexp.MustCompile(`(?is)<head\b.*?</head>`),
		regexp.MustCompile(`(?is)<script\b.*?</script>`),
		regexp.MustCompile(`(?is)<style\b.*?</style>`),
		regexp.MustCompile(`(?is)<svg\b.*?</svg>`),
	}
	reTag    = regexp.MustCompile(`(?s)<[^>]*>`)
	reSpace  = regexp.MustCompile(`\s+`)
	reIframe = regexp.MustCompile(`(?is)<iframe\b[^>]*\bsrc="([^"]*)"`)
)

// contains says whether the page's text (its <main> content) holds s,
// whitespace ignored: the DOM splits text across elements.
func (p uiPage) contains(s string) bool {
	return strings.Contains(reSpace.ReplaceAllString(p.text, ""), reSpace.ReplaceAllString(s, ""))
}

// has returns an error naming every string missing from the page's text.
func (p uiPage) has(want ...string) error {
	var missing []string
	for _, w := range want {
		if !p.contains(w) {
			missing = append(missing, fmt.Sprintf("%q", w))
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("the page does not show %s", strings.Join(missing, ", "))
	}
	return nil
}

// rendered lists the page's markdown documents (the workflow's summary and
// details, its current details), which the page shows in iframes loaded
// from /render?content=<markdown>.
func (p uiPage) rendered() []renderedDoc {
	var docs []renderedDoc
	for _, m := range reIframe.FindAllStringSubmatch(p.dom, -1) {
		src := html.UnescapeString(m[1])
		if u, err := url.Parse(src); err == nil && u.Path == "/render" {
			docs = append(docs, renderedDoc{src: src, content: u.Query().Get("content")})
		}
	}
	return docs
}

type renderedDoc struct{ src, content string }

// render loads url in a fresh headless Chromium and returns its DOM and
// a screenshot saved as <name>.png (the DOM as <name>.html).
func (v *uiViewer) render(name, url string) (uiPage, error) {
	p := uiPage{url: url, shot: filepath.Join(v.dir, name+".png")}
	profile, err := os.MkdirTemp("", "adoption-chromium-")
	if err != nil {
		return p, err
	}
	defer os.RemoveAll(profile)
	_ = os.Remove(p.shot)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, v.chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+profile, "--window-size=1400,900",
		"--virtual-time-budget=5000", "--screenshot="+p.shot, "--dump-dom", url)
	// /usr/bin/chromium is a shell script: on timeout kill the whole group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	p.dom = string(out)
	_ = os.WriteFile(filepath.Join(v.dir, name+".html"), out, 0o644)
	if err != nil {
		return p, fmt.Errorf("chromium %s: %v\n%s", url, err, lastLines(stderr.String(), 10))
	}
	if _, err := os.Stat(p.shot); err != nil {
		return p, fmt.Errorf("chromium wrote no screenshot for %s:\n%s", url, lastLines(stderr.String(), 10))
	}
	// The page's own content: the UI puts it in <main>, after the
	// navigation and the header (whose time zone menu is long).
	body := p.dom
	if i := strings.Index(body, "<main"); i >= 0 {
		body = body[i:]
	}
	for _, re := range reHidden {
		body = re.ReplaceAllString(body, " ")
	}
	p.text = html.UnescapeString(reSpace.ReplaceAllString(reTag.ReplaceAllString(body, " "), " "))
	return p, nil
}

// until renders url until check passes (visibility and the UI catch up
// within seconds; the UI now and then answers a first load with its error
// page) and fails the test with the last reason and the screenshot.
func (v *uiViewer) until(t *testing.T, name, url string, check func(uiPage) error) uiPage {
	t.Helper()
	start := time.Now()
	deadline := start.Add(90 * time.Second)
	for attempt := 1; ; attempt++ {
		p, err := v.render(name, url)
		if err == nil {
			if p.contains("Uh oh. There's an error") {
				err = fmt.Errorf("the UI shows its error page: %s", excerpt(p.text, 200))
			} else {
				err = check(p)
			}
		}
		if err == nil {
			t.Logf("web UI %s: %s shows what it should (attempt %d, %s); screenshot %s",
				name, url, attempt, time.Since(start).Round(100*time.Millisecond), p.shot)
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("web UI %s: %s after %d attempts: %v\nscreenshot: %s\nDOM: %s\npage text: %s",
				name, url, attempt, err, p.shot, filepath.Join(v.dir, name+".html"), excerpt(p.text, 1500))
		}
		t.Logf("web UI %s: attempt %d: %v", name, attempt, firstLine(err))
		time.Sleep(time.Second)
	}
}

func excerpt(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func firstLine(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	return s
}
