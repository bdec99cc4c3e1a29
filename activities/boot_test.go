package activities

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"adoption/activities/authority"
	"adoption/activities/fake"
	"adoption/firewall"
	"adoption/firewall/flip"
	"adoption/nodestate"
)

// debianBoot lays out nftables.service under root as Debian 12 installs
// it, enabled (the link systemctl enable writes) or not (a stock install).
func debianBoot(t *testing.T, root string, enabled bool) {
	t.Helper()
	unit := filepath.Join(root, "lib/systemd/system/nftables.service")
	must(t, os.MkdirAll(filepath.Dir(unit), 0o755))
	must(t, os.WriteFile(unit, []byte("[Service]\nExecStart=/usr/sbin/nft -f /etc/nftables.conf\nExecStop=/usr/sbin/nft flush ruleset\n[Install]\nWantedBy=sysinit.target\n"), 0o644))
	link := filepath.Join(root, "etc/systemd/system/sysinit.target.wants/nftables.service")
	must(t, os.RemoveAll(link))
	if enabled {
		must(t, os.MkdirAll(filepath.Dir(link), 0o755))
		must(t, os.Symlink("/lib/systemd/system/nftables.service", link))
	}
}

// noBoot takes nftables.service away from root: not installed, not enabled.
func noBoot(t *testing.T, root string) {
	t.Helper()
	must(t, os.RemoveAll(filepath.Join(root, "lib/systemd/system/nftables.service")))
	must(t, os.RemoveAll(filepath.Join(root, "etc/systemd/system/sysinit.target.wants/nftables.service")))
}

// enableBootService is flip.enable_boot_service: true in the node's own
// configuration.
func enableBootService(a *Activities) {
	local := a.Local
	a.Local = func() (*authority.Authority, error) {
		au, err := local()
		if err != nil {
			return nil, err
		}
		c := *au
		c.EnableBootService = true
		return &c, nil
	}
}

// confirmedFlip leaves flip n1-1 applied and confirmed, not committed (as
// a round trip whose commit failed leaves it), for the commit to be tried
// on what the test changes since; the request CommitFlip takes is returned.
func confirmedFlip(t *testing.T, a *Activities) ConfirmInput {
	t.Helper()
	if _, err := applyStage(context.Background(), a, flipIn("n1-1")); err != nil {
		t.Fatal(err)
	}
	if _, err := confirmStage(context.Background(), a, "n1-1"); err != nil {
		t.Fatal(err)
	}
	return ConfirmInput{Plan: flipPlanN1().Ref(), ID: "n1-1"}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return string(b)
}

// The commit checks the boot path again (it may have changed since the
// preview checked it): on a stock Debian 12 (nftables.service installed,
// not enabled) the commit refuses, naming what to do, and changes nothing;
// with flip.enable_boot_service it enables the unit itself (the link in
// custody: a restore takes it away again) and keeps the unit's stop from
// flushing the ruleset with a drop-in. Without nftables installed it
// refuses whatever the configuration says.
func TestCommitBootServiceEnabled(t *testing.T) {
	a, fl, root := flipActs(t)
	must(t, os.MkdirAll(filepath.Join(root, "etc/ufw"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "etc/ufw/ufw.conf"), []byte(ufwConf), 0o644))
	in := confirmedFlip(t, a)
	noBoot(t, root) // the package removed since the preview
	_, err := a.CommitFlip(context.Background(), in)
	msg := appErr(t, err, ErrBootPath)
	if !strings.Contains(msg, "nftables.service is not installed") || !strings.Contains(msg, "Nothing was changed") {
		t.Fatalf("commit without nftables: %s", msg)
	}
	debianBoot(t, root, false)
	_, err = a.CommitFlip(context.Background(), in)
	msg = appErr(t, err, ErrBootPath)
	if !strings.Contains(msg, "nftables.service is not enabled") || !strings.Contains(msg, "systemctl enable nftables") ||
		!strings.Contains(msg, "flip.enable_boot_service: true") || !strings.Contains(msg, "Nothing was changed") {
		t.Fatalf("commit with nftables.service disabled: %s", msg)
	}
	if fl.Commits != 0 || readFile(t, filepath.Join(root, "etc/ufw/ufw.conf")) != ufwConf || readFile(t, filepath.Join(root, "etc/nftables.conf")) != "" {
		t.Fatalf("a refused commit changed something: %d firewall commits", fl.Commits)
	}
	if rec := record(t, a); rec.State != nodestate.FlipConfirmed || len(rec.CommitDone) != 0 {
		t.Fatalf("record after a refused commit: %+v", rec)
	}

	enableBootService(a)
	if _, err := a.CommitFlip(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(root, "etc/systemd/system/sysinit.target.wants/nftables.service")
	if target, err := os.Readlink(link); err != nil || target != "/lib/systemd/system/nftables.service" {
		t.Fatalf("nftables.service not enabled: %q %v", target, err)
	}
	dropIn := readFile(t, filepath.Join(root, strings.TrimPrefix(BootDropIn, "/")))
	if !strings.Contains(dropIn, "[Service]\nExecStop=\n") {
		t.Fatalf("drop-in:\n%s", dropIn)
	}
	if rec, ok, err := a.Files.Record("/etc/systemd/system/sysinit.target.wants/nftables.service"); err != nil || !ok || rec.Found {
		t.Fatalf("the enabling link's custody record: %+v %v %v", rec, ok, err)
	}
	must(t, a.Files.Restore("/etc/systemd/system/sysinit.target.wants/nftables.service"))
	must(t, a.Files.Restore(BootDropIn))
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the restore left the link the commit made: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(root, strings.TrimPrefix(BootDropIn, "/"))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the restore left the drop-in the commit wrote: %v", err)
	}
}

// netfilter-persistent, enabled with rules files present, would load the
// predecessor's iptables rules at boot: the commit refuses and names the
// command; with flip.enable_boot_service it switches the unit off itself
// (the link in custody, restored as it was).
func TestCommitSwitchesOffNetfilterPersistent(t *testing.T) {
	a, fl, root := flipActs(t)
	debianBoot(t, root, true)
	link := filepath.Join(root, "etc/systemd/system/multi-user.target.wants/netfilter-persistent.service")
	must(t, os.MkdirAll(filepath.Dir(link), 0o755))
	must(t, os.Symlink("/lib/systemd/system/netfilter-persistent.service", link))
	must(t, os.MkdirAll(filepath.Join(root, "etc/iptables"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "etc/iptables/rules.v4"), []byte("*filter\n:INPUT DROP [0:0]\nCOMMIT\n"), 0o640))
	// The preview checks it first: no flip is applied that the commit
	// would refuse.
	previewRefusedForBoot(t, a, fl, "netfilter-persistent.service is enabled", "systemctl disable netfilter-persistent", "then preview again")
	// Enabled after the flip: the commit checks again.
	must(t, os.Rename(link, link+".off"))
	in := confirmedFlip(t, a)
	must(t, os.Rename(link+".off", link))
	_, err := a.CommitFlip(context.Background(), in)
	msg := appErr(t, err, ErrBootPath)
	if !strings.Contains(msg, "netfilter-persistent.service is enabled") || !strings.Contains(msg, "systemctl disable netfilter-persistent") || !strings.Contains(msg, "Nothing was changed") {
		t.Fatalf("commit with netfilter-persistent enabled: %s", msg)
	}
	enableBootService(a)
	if _, err := a.CommitFlip(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(link); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("netfilter-persistent still enabled: %v", err)
	}
	p := "/etc/systemd/system/multi-user.target.wants/netfilter-persistent.service"
	must(t, a.Files.Restore(p))
	if target, err := os.Readlink(link); err != nil || target != "/lib/systemd/system/netfilter-persistent.service" {
		t.Fatalf("custody did not give back the link: %q %v", target, err)
	}
}

// The commit removes the predecessor first and writes the boot files
// last. A failure in the first step changes nothing and says so; a
// failure after it says exactly what was done and what not (never
// "nothing was changed"), and the retry resumes without removing the
// predecessor again.
func TestCommitOrderAndHonesty(t *testing.T) {
	a, fl, root := flipActs(t)
	debianBoot(t, root, true)
	must(t, os.WriteFile(filepath.Join(root, "etc/nftables.conf"), []byte(debianNftablesConf), 0o755))
	in := confirmedFlip(t, a)
	fl.CommitErr = fmt.Errorf("netlink: device busy")
	_, err := a.CommitFlip(context.Background(), in)
	if err == nil || !strings.Contains(err.Error(), "device busy") || !strings.Contains(err.Error(), "Nothing was changed") {
		t.Fatalf("commit with a failing firewall: %v", err)
	}
	if readFile(t, filepath.Join(root, "etc/nftables.conf")) != debianNftablesConf {
		t.Fatal("the boot file was written before the predecessor was removed")
	}
	fl.CommitErr = nil
	// ufw.conf cannot be read (a directory where the file should be): the
	// last step fails after the others are done.
	must(t, os.MkdirAll(filepath.Join(root, "etc/ufw/ufw.conf"), 0o755))
	_, err = a.CommitFlip(context.Background(), in)
	if err == nil || strings.Contains(err.Error(), "Nothing was changed") {
		t.Fatalf("a commit that stopped after changing things: %v", err)
	}
	for _, want := range []string{`stopped at "set ENABLED=no in /etc/ufw/ufw.conf"`, "Steps done: remove the predecessor's firewall; set up nftables.service to load the mesh's table at boot; write /etc/nftables.conf",
		"removed the predecessor's firewall (saved to ", "Not done: set ENABLED=no in /etc/ufw/ufw.conf", "adopt retry n1"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q:\n%v", want, err)
		}
	}
	if !strings.Contains(readFile(t, filepath.Join(root, "etc/nftables.conf")), "table inet adoption {") {
		t.Fatal("the boot file was not written")
	}
	if rec := record(t, a); rec.State != nodestate.FlipConfirmed || len(rec.CommitDone) != 3 {
		t.Fatalf("record after a commit that stopped: %+v", rec)
	}
	must(t, os.Remove(filepath.Join(root, "etc/ufw/ufw.conf")))
	must(t, os.WriteFile(filepath.Join(root, "etc/ufw/ufw.conf"), []byte(ufwConf), 0o644))
	res, err := a.CommitFlip(context.Background(), in)
	if err != nil || res.Listing == "" {
		t.Fatalf("the retried commit: %+v %v", res, err)
	}
	if fl.Commits != 2 {
		t.Fatalf("the retry removed the predecessor again: %d firewall commits, want 2 (the failed one and the first good one)", fl.Commits)
	}
	if got := readFile(t, filepath.Join(root, "etc/ufw/ufw.conf")); !strings.Contains(got, "ENABLED=no") {
		t.Fatalf("ufw.conf after the retry:\n%s", got)
	}
}

// A flip the kernel does not hold (a reboot inside the confirm window put
// the predecessor back) is never confirmed: the round trip resuming it
// reverts it and says why, and no commit follows.
func TestConfirmRefusesAFlipNotInForce(t *testing.T) {
	a, fl, root := flipActs(t)
	debianBoot(t, root, true)
	if _, err := applyStage(context.Background(), a, flipIn("n1-1")); err != nil {
		t.Fatal(err)
	}
	fl.InForceErr = fmt.Errorf("%w on node n1: table inet adoption is not in the ruleset", flip.ErrNotInForce)
	in := ConfirmInput{Plan: flipPlanN1().Ref(), ID: "n1-1"}
	_, err := oneTrip(t, a, flipIn("n1-1"))
	msg := appErr(t, err, ErrFlipReverted)
	if !strings.Contains(msg, "table inet adoption is not in the ruleset") {
		t.Fatalf("confirm of a flip not in force: %s", msg)
	}
	if rec := record(t, a); rec.State != nodestate.FlipReverted || !strings.Contains(rec.Reason, "not in the ruleset") || len(fl.Reverts) != 1 || fl.Commits != 0 {
		t.Fatalf("record %+v, %d reverts, %d commits", rec, len(fl.Reverts), fl.Commits)
	}
	_, err = a.CommitFlip(context.Background(), in)
	appErr(t, err, ErrFlipNotConfirmed)
	if fl.Commits != 0 || readFile(t, filepath.Join(root, "etc/nftables.conf")) != "" {
		t.Fatal("a flip that was not in force was committed")
	}
	// A listing that fails is not an answer: nothing is decided.
	a2, fl2, _ := flipActs(t)
	fl2.InForceErr = fmt.Errorf("netlink: no buffer space")
	if _, err := oneTrip(t, a2, flipIn("n1-1")); err == nil || !strings.Contains(err.Error(), "no buffer space") {
		t.Fatalf("confirmed without reading the kernel: %v", err)
	}
	if rec := record(t, a2); rec.State != nodestate.FlipFlipped || len(fl2.Reverts) != 0 {
		t.Fatalf("an unread kernel moved the flip: %+v", rec)
	}
}

// A table the flip keeps in force (a native predecessor's nat table) that
// the found boot file does not declare would be lost at boot: the commit
// refuses before it changes anything, naming the table and what to do.
func TestCommitRefusesAKeptTableTheBootWouldLose(t *testing.T) {
	a, fl, root := flipActs(t)
	a.Root = root
	debianBoot(t, root, true)
	const flushOnly = "#!/usr/sbin/nft -f\n\nflush ruleset\n"
	must(t, os.WriteFile(filepath.Join(root, "etc/nftables.conf"), []byte(flushOnly), 0o755))
	found := defaultDeny22()
	found.Tables = append(found.Tables, firewall.Table{Family: "ip", Name: "natp", Chains: []firewall.Chain{
		{Name: "postrouting", Hook: "postrouting", Type: "nat", Priority: 100, Policy: "accept"}}})
	a.Firewall = fake.Firewall{Rules: found}
	must(t, a.State.SetBaseline(nodestate.Baseline{Firewall: flip.FoundFingerprint(found)}))
	// The preview refuses first, naming the table.
	previewRefusedForBoot(t, a, fl, "keeps table ip natp in force", "then preview again")
	// The boot file changed after the flip: the commit checks again.
	withNat := flushOnly + "table ip natp {\n\tchain postrouting { type nat hook postrouting priority srcnat; }\n}\n"
	must(t, os.WriteFile(filepath.Join(root, "etc/nftables.conf"), []byte(withNat), 0o755))
	in := confirmedFlip(t, a)
	must(t, os.WriteFile(filepath.Join(root, "etc/nftables.conf"), []byte(flushOnly), 0o755))
	_, err := a.CommitFlip(context.Background(), in)
	msg := appErr(t, err, ErrBootPath)
	if !strings.Contains(msg, "keeps table ip natp in force") || !strings.Contains(msg, "Nothing was changed") || fl.Commits != 0 {
		t.Fatalf("commit with a kept table the boot file lacks: %s (%d firewall commits)", msg, fl.Commits)
	}
	must(t, os.WriteFile(filepath.Join(root, "etc/nftables.conf"), []byte(withNat), 0o755))
	if _, err := a.CommitFlip(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, filepath.Join(root, "etc/nftables.conf")); !strings.Contains(got, "table ip natp {") || strings.Contains(got, "flush ruleset") {
		t.Fatalf("boot file:\n%s", got)
	}
}

// previewRefusedForBoot checks that the preview refuses for the boot path,
// its reason naming each of want, and that the flip's own preview refuses
// it for that before anything is applied.
func previewRefusedForBoot(t *testing.T, a *Activities, fl *fake.Flipper, want ...string) {
	t.Helper()
	pv, err := a.Preview(context.Background(), PreviewInput{Plan: flipPlanN1().Ref(), Spec: flipSpecN1})
	if err != nil {
		t.Fatal(err)
	}
	reason := ""
	for _, r := range pv.Reasons {
		if strings.Contains(r, "the commit would refuse") {
			reason = r
		}
	}
	if pv.Approved || reason == "" {
		t.Fatalf("preview approved %v, reasons %q: want it refused for the boot path", pv.Approved, pv.Reasons)
	}
	for _, w := range want {
		if !strings.Contains(reason, w) {
			t.Errorf("the preview's reason %q lacks %q", reason, w)
		}
	}
	res, err := oneTrip(t, a, flipIn("n1-1"))
	if why := refusedTrip(t, res, err); !strings.Contains(why, "the commit would refuse") {
		t.Errorf("flip refusal %q does not say the commit would refuse", why)
	}
	if len(fl.Flips) != 0 {
		t.Fatalf("a flip was applied (%d) although the preview refused", len(fl.Flips))
	}
}

// On a node root without nftables.service, or with it installed and not
// enabled (a stock Debian 12), the preview refuses naming why and what to
// run, and no flip is applied: the commit would refuse it after the
// confirmation, and the node would sit confirmed and flipped. With
// flip.enable_boot_service the commit may enable an installed unit, so the
// preview approves; a unit that is not installed refuses whatever the
// configuration says.
func TestPreviewRefusesWhatTheCommitWould(t *testing.T) {
	a, fl, root := flipActs(t)
	noBoot(t, root)
	previewRefusedForBoot(t, a, fl, "nftables.service is not installed on node n1", "install the nftables package, then preview again")
	enableBootService(a)
	previewRefusedForBoot(t, a, fl, "nftables.service is not installed on node n1")
	a2, fl2, root2 := flipActs(t)
	debianBoot(t, root2, false)
	previewRefusedForBoot(t, a2, fl2, "nftables.service is not enabled", "systemctl enable nftables", "flip.enable_boot_service: true", "then preview again")
	enableBootService(a2)
	pv, err := a2.Preview(context.Background(), PreviewInput{Plan: flipPlanN1().Ref(), Spec: flipSpecN1})
	if err != nil || !pv.Approved {
		t.Fatalf("with flip.enable_boot_service and the unit installed: approved %v, %q, %v", pv != nil && pv.Approved, pv.Reasons, err)
	}
	if res, err := oneTrip(t, a2, flipIn("n1-1")); err != nil || res.State != nodestate.FlipCommitted {
		t.Fatalf("the flip its preview approves: %+v %v", res, err)
	}
}
