package tests

// This file drives the Temporal Web UI as an operator acting from it: a
// real Chromium, driven over the DevTools protocol (chromedp), clicks the
// workflow page's Send a Signal dialog and pastes the input; nothing is
// sent by API. The screenshots are kept under testdata/webui/ (gitignored).

import (
	"context"
	"fmt"
	"html"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"

	"adoption/workflows"
)

// TestWebUISignedSignals: on a node whose file lists the operator's key,
// an unsigned migrate sent from the UI's Signal dialog is refused by the
// node, and the page says why and how to sign (current details) and
// AdoptionAttention says cutover-failed; the list filtered by
// AdoptionAttention="cutover-failed" finds the node; the retry that
// `adopt sign` printed, pasted into the dialog, migrates the module; after
// an approved preview, the flip `adopt sign` printed, pasted the same way,
// converges the node. Every payload is encrypted (the UI encodes the input
// through the codec server's /encode).
func TestWebUISignedSignals(t *testing.T) {
	needE2E(t)
	chrome := chromiumBin(t)
	key := writeCodecKey(t, 0x4d)
	t.Setenv("ADOPT_TEMPORAL_CODEC_KEY_FILE", key)
	codecPort := freePort(t)
	srv, uiAddr := startDevServerWithUI(t, "--ui-codec-endpoint", fmt.Sprintf("http://127.0.0.1:%d", codecPort))
	startCodecServer(t, key, codecPort, uiAddr)
	n := flipNode(t, "webuisig", 133, srv, "30s")
	startWorker(t, n)
	if out, errs, code := adopt(t, "start", n.Name, "--config", n.cfg); code != 0 {
		t.Fatalf("adopt start: exit %d\n%s%s", code, out, errs)
	}
	waitPhase(t, n, workflows.PhaseAdopted, 90*time.Second)
	wfID := workflows.WorkflowID(n.Name)
	ns := uiAddr + "/namespaces/default"
	b := newBrowser(t, chrome)

	// (1) Unsigned, from the dialog: refused by the node, said on the page.
	b.open(t, "signal-unsigned-open", ns+"/workflows/"+url.PathEscape(wfID))
	b.signal(t, "signal-unsigned", workflows.SignalMigrate, `{"module":"web"}`)
	st := waitFor(t, n, "the unsigned migrate to be refused", func(st workflows.State) bool {
		return st.Refused != nil && st.Modules[0].State == workflows.ModuleFailed
	})
	if !strings.Contains(st.Refused.Why, "intent refused (missing)") || !strings.Contains(st.Refused.Why, "adopt sign migrate "+n.Name+" web") {
		t.Fatalf("the refusal does not say why and how to sign: %q", st.Refused.Why)
	}
	// The run's page (its location names the run), User Metadata tab:
	// the current details.
	loc, err := chromedp.Run(b.ctx, chromedp.Location())
	if err != nil {
		t.Fatal(err)
	}
	runPage := strings.TrimSuffix(loc, "/history")
	b.until(t, "signal-unsigned-refused", runPage+"/user-metadata", func(dom string) error {
		for _, doc := range renderedDocs(dom) {
			if strings.Contains(doc, "**Refused migrate web:**") && strings.Contains(doc, "`adopt sign migrate "+n.Name+" web`") {
				return nil
			}
		}
		return fmt.Errorf("the current details do not show the refusal with how to sign")
	})

	// (2) The list filtered by what needs a person finds it.
	filter := fmt.Sprintf("%s=%q", workflows.AttrAttention.GetName(), workflows.AttentionCutoverFailed)
	b.until(t, "list-attention", ns+"/workflows?query="+url.QueryEscape(filter), func(dom string) error {
		if !strings.Contains(dom, wfID) {
			return fmt.Errorf("the list filtered by %s does not show %s", filter, wfID)
		}
		return nil
	})
	if err := b.run(t, "list-attention-open", 60*time.Second, clickVisible(`a`, wfID), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
		t.Fatalf("web UI: open %s from the filtered list: %v", wfID, err)
	}

	// (3) The signed retry, pasted: the module migrates.
	signed, errs, code := adopt(t, "sign", "retry", n.Name, "web", "--config", n.cfg)
	if code != 0 {
		t.Fatalf("adopt sign retry: exit %d\n%s", code, errs)
	}
	b.signal(t, "signal-retry", workflows.SignalRetry, signed)
	waitFor(t, n, "web to migrate after the signed retry", func(st workflows.State) bool {
		return st.Modules[0].State == workflows.ModuleMigrated
	})
	b.until(t, "attention-cleared", runPage+"/search-attributes", func(dom string) error {
		if strings.Contains(dom, workflows.AttentionCutoverFailed) {
			return fmt.Errorf("AdoptionAttention still says %s", workflows.AttentionCutoverFailed)
		}
		if !strings.Contains(dom, workflows.AttrAttention.GetName()) {
			return fmt.Errorf("the search attributes do not show %s", workflows.AttrAttention.GetName())
		}
		return nil
	})

	// (4) After an approved preview, the signed flip, pasted: converged.
	setDrop(t, n, `"8080/tcp", "53/udp"`)
	if out, errs, _ := adopt(t, "preview", n.Name, "--config", n.cfg); !strings.Contains(out, "APPROVED") {
		t.Fatalf("preview with the drops should approve:\n%s%s", out, errs)
	}
	signed, errs, code = adopt(t, "sign", "flip", n.Name, "--config", n.cfg)
	if code != 0 {
		t.Fatalf("adopt sign flip: exit %d\n%s", code, errs)
	}
	b.open(t, "signal-flip-open", ns+"/workflows/"+url.PathEscape(wfID))
	b.signal(t, "signal-flip", workflows.SignalFlip, signed)
	waitPhase(t, n, workflows.PhaseConverged, 120*time.Second)
}

// browser is one headless Chromium driven over the DevTools protocol.
type browser struct {
	ctx context.Context
	dir string // screenshots
}

func newBrowser(t *testing.T, chrome string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chrome), chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.Flag("disable-dev-shm-usage", true), chromedp.Flag("disable-quic", true),
		chromedp.WindowSize(1400, 900), chromedp.UserDataDir(t.TempDir()))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("chromium %s does not start: %v", chrome, err)
	}
	dir, err := filepath.Abs(filepath.Join("testdata", "webui"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &browser{ctx: ctx, dir: dir}
}

// run runs actions within bound, then keeps a screenshot as name.png.
func (b *browser) run(t *testing.T, name string, bound time.Duration, actions ...chromedp.Action[chromedp.Void]) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, bound)
	defer cancel()
	err := chromedp.Do(ctx, actions...)
	b.shot(t, name)
	return err
}

func (b *browser) shot(t *testing.T, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err == nil {
		t.Logf("web UI: screenshot %s", p)
	}
	if dom, err := chromedp.Run(ctx, chromedp.OuterHTML(chromedp.CSS("html"))); err == nil {
		_ = os.WriteFile(filepath.Join(b.dir, name+".html"), []byte(dom), 0o644)
	}
}

// open loads url and waits for the page's main content.
func (b *browser) open(t *testing.T, name, url string) {
	t.Helper()
	if err := b.run(t, name, 60*time.Second, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("main"))); err != nil {
		t.Fatalf("web UI %s: %s: %v", name, url, err)
	}
}

// until loads url until check passes on its DOM, within 90 s.
func (b *browser) until(t *testing.T, name, url string, check func(dom string) error) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for attempt := 1; ; attempt++ {
		var dom string
		err := b.run(t, name, 60*time.Second, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("main")),
			chromedp.Sleep(2*time.Second), chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
				var err error
				dom, err = chromedp.OuterHTML(chromedp.CSS("html"))(ctx, tg)
				return err
			}))
		if err == nil {
			err = check(dom)
		}
		if err == nil {
			t.Logf("web UI %s: %s shows what it should (attempt %d)", name, url, attempt)
			return
		}
		if time.Now().After(deadline) {
			_ = os.WriteFile(filepath.Join(b.dir, name+".html"), []byte(dom), 0o644)
			t.Fatalf("web UI %s: %s after %d attempts: %v (screenshot and DOM under %s)", name, url, attempt, err, b.dir)
		}
		time.Sleep(time.Second)
	}
}

// signal sends signal name with payload through the workflow page's Send a
// Signal dialog, as a person does: More Actions, Send a Signal, the name
// (picked from the signals the workflow declares, or typed), the input
// pasted into the editor, Submit. It waits for the UI's success toast.
func (b *browser) signal(t *testing.T, shot, name, payload string) {
	t.Helper()
	const modal = `[data-testid="signal-confirmation-modal"]`
	steps := []struct {
		what string
		act  chromedp.Action[chromedp.Void]
	}{
		{"More Actions", clickVisible(`button[aria-controls="workflow-actions"]`, "")},
		{"Send a Signal", clickVisible(`[data-testid="signal-button"]`, "")},
		{"the signal's name", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error { return pickSignal(ctx, tg, modal, name) })},
		{"the input's editor", clickVisible(modal+` .cm-content`, "")},
		{"select all", chromedp.KeyEvent("a", chromedp.KeyModifiers(chromedp.ModifierCtrl))},
		{"paste", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, input.InsertText, input.InsertTextParams{Text: payload})
			return err
		})},
		{"Submit", clickVisible(modal+` [data-testid="confirm-modal-button"]`, "")},
		{"the success toast", chromedp.WaitVisible(chromedp.CSS(`#workflow-signal-success-toast`))},
	}
	for i, s := range steps {
		if err := b.run(t, fmt.Sprintf("%s-%d", shot, i+1), 30*time.Second, s.act); err != nil {
			t.Fatalf("web UI: signal %s: %s: %v (screenshots under %s)", name, s.what, err, b.dir)
		}
	}
}

// pickSignal fills the dialog's signal name: the select's option of that
// name when the UI lists the workflow's signals, else the text input.
func pickSignal(ctx context.Context, tg *chromedp.Target, modal, name string) error {
	for {
		sel, err := chromedp.Evaluate[int](markVisible(modal+` [data-testid="signal-select-button"]`, ""))(ctx, tg)
		if err != nil {
			return err
		}
		typed, err := chromedp.Evaluate[int](markVisible(modal+` #signal-name`, ""))(ctx, tg)
		if err != nil {
			return err
		}
		switch {
		case sel > 0:
			if _, err := clickVisible(modal+` [data-testid="signal-select-button"]`, "")(ctx, tg); err != nil {
				return err
			}
			_, err := clickVisible(`[role="option"]`, name)(ctx, tg)
			return err
		case typed > 0:
			_, err := chromedp.SendKeys(chromedp.CSS(`[data-i40-pick]`), name)(ctx, tg)
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the dialog shows neither a signal select nor a name input: %w", ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// markVisible is a script that marks (data-i40-pick) the first element
// matching css that is displayed, whose text's first word is word when
// given, and returns how many it marked (0 or 1). A page can hold an
// element twice, one copy hidden (the UI's responsive layouts).
func markVisible(css, word string) string {
	return fmt.Sprintf(`(() => {
		document.querySelectorAll('[data-i40-pick]').forEach(e => e.removeAttribute('data-i40-pick'));
		const el = [...document.querySelectorAll(%q)].find(e => e.getClientRects().length > 0 &&
			getComputedStyle(e).visibility !== 'hidden' && (%q === '' || e.textContent.trim().split(/\s+/)[0] === %q));
		if (!el) return 0;
		el.setAttribute('data-i40-pick', '1');
		return 1;
	})()`, css, word, word)
}

// clickVisible clicks, with the mouse, the displayed element markVisible
// finds, waiting for it to appear.
func clickVisible(css, word string) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		for {
			n, err := chromedp.Evaluate[int](markVisible(css, word))(ctx, tg)
			if err != nil {
				return chromedp.Void{}, err
			}
			if n > 0 {
				return chromedp.Click(chromedp.CSS(`[data-i40-pick]`))(ctx, tg)
			}
			select {
			case <-ctx.Done():
				return chromedp.Void{}, fmt.Errorf("no displayed %s %s: %w", css, word, ctx.Err())
			case <-time.After(300 * time.Millisecond):
			}
		}
	}
}

// renderedDocs are the markdown documents of a workflow page (summary,
// details, current details), which it renders in iframes from
// /render?content=<markdown>.
func renderedDocs(dom string) []string {
	var docs []string
	for _, m := range reIframe.FindAllStringSubmatch(dom, -1) {
		if u, err := url.Parse(html.UnescapeString(m[1])); err == nil && u.Path == "/render" {
			docs = append(docs, u.Query().Get("content"))
		}
	}
	return docs
}
