// Package cutover moves a module's service from its predecessor container
// (or unit) to the mesh's, on the node's Docker engine (package containers).
//
// The cutover: the container names carry the state, so a resumed activity
// needs nothing but Docker to know where it was: <name> (live), <name>.next
// (the mesh's, created, not started), <name>.predecessor (stopped, kept for a
// rollback). "Ours" is labelled adoption.module=<name>, and records the ID it
// replaces (adoption.predecessor), so lineage is checked by ID, never by name.
// Every step inspects the three names and does only what is left: a step
// called again after a crash or a success is safe. No step removes a volume.

package cutover

import (
	"errors"
	"sync"
	"time"

	"adoption/containers"
	"adoption/containers/cutoverwire"
	"adoption/units"
)

// Engine is the node's Docker engine as the cutover drives it. It is a
// containers.Engine (Report, BridgeNetworks) with the cutover's steps and
// the parts they use on the node.
type Engine struct {
	*containers.Engine
	cli containers.API

	// portFree says whether a host port can be bound; a field so unit tests
	// need not hold real ports.
	portFree func(proto, hostIP string, port uint16) error
	// udpBound says whether a process's namespace has a UDP socket on a
	// port (udpBound in unit.go); a field for the same reason.
	udpBound func(pid int, port uint16) bool
	// beforeStep, when set (tests only), runs before each cutover sub-step; an
	// error stops the step there, as a crash of the worker would.
	beforeStep func(step string) error
	// hold, when set, holds new connections to the predecessors' ports
	// during the swap (see PortHold).
	hold PortHold
	// steer, when set, moves published host ports between containers for
	// the overlap cutover (see PortSteer).
	steer PortSteer
	// steered is what Resteer last pointed each module's ports at.
	steerMu sync.Mutex
	steered map[string]string
	// units, when set, is the node's service manager: a module may take
	// over a predecessor that is a system unit (see unit.go).
	units units.Manager
	// digest, when set, is the node's keyed digest that names the values
	// of a conflict (WithDigest).
	digest func([]byte) string
}

// New connects to the engine named by DOCKER_HOST (default: the local socket).
// It never fails: an unreachable engine shows in Report, and fails each step.
func New() *Engine { return On(containers.New()) }

// NewAt connects to the engine at host, as containers.NewAt.
func NewAt(host string) *Engine { return On(containers.NewAt(host)) }

// NewWith wraps an existing client (tests).
func NewWith(cli containers.API) *Engine { return On(containers.NewWith(cli)) }

// On is the cutover on an engine already connected.
func On(e *containers.Engine) *Engine {
	return &Engine{Engine: e, cli: e.Client(), portFree: bindable, udpBound: udpBound}
}

// Labels the mesh puts on the containers it creates.
const (
	LabelModule      = "adoption.module"      // the module's name: the container is ours
	LabelPredecessor = "adoption.predecessor" // ID of the container it replaces; "" for a new service
	// LabelRestart is the restart policy the container is armed with at the
	// swap; it is the predecessor's, so a rollback restores it from here.
	LabelRestart = "adoption.restart"
	// LabelPredecessorRunning and LabelPredecessorRestart are the
	// predecessor as it was when the cutover began: a rollback starts it again
	// only if it ran, and gives it back its restart policy, which the swap
	// sets to "no".
	LabelPredecessorRunning = "adoption.predecessor.running"
	LabelPredecessorRestart = "adoption.predecessor.restart"
	LabelSpec               = "adoption.spec" // digest of what Create was asked for
	// LabelReplaced lists the predecessors of other names the container
	// takes over, as JSON [{name, id, running, restart}]: the swap, a
	// rollback and the prune find them by ID from here.
	LabelReplaced = "adoption.replaced"
	// LabelCutover is "overlap" on a container an overlap cutover starts
	// beside its predecessor: its rollback moves the ports back the same way.
	LabelCutover = "adoption.cutover"
	// LabelOverlapPorts is the overlap's host ports as the spec maps them
	// (JSON), for Swap to move them: the container publishes them on
	// loopback only.
	LabelOverlapPorts = "adoption.overlap.ports"
)

// Name suffixes that carry the cutover's state.
const (
	NextSuffix        = ".next"
	PredecessorSuffix = ".predecessor"
)

// Errors a caller tells apart with errors.Is. All but a Docker fault are bad
// input or a refused cutover: retrying without a change will not help.
var (
	ErrImageMissing = errors.New("image not present")
	ErrMigrated     = errors.New("module already migrated")
	ErrConflict     = errors.New("container name conflict")
	ErrPortHeld     = errors.New("port held")
	ErrUnhealthy    = errors.New("container not healthy")
	ErrNoRollback   = errors.New("nothing to roll back to")
	ErrPortDropped  = errors.New("published port would vanish")
	ErrBadSpec      = errors.New("bad module container")
)

// Cutover sub-steps, as passed to the progress hook. They are stable names:
// the activity may record them in heartbeats and arm failpoints on them.
const (
	StepPreflight           = "preflight"
	StepCreate              = "create"
	StepConnectNetworks     = "create/connect-networks"
	StepArmRestart          = "swap/arm-restart"
	StepDisarmPredecessor   = "swap/disarm-predecessor-restart"
	StepStopPredecessor     = "swap/stop-predecessor"
	StepRenamePredecessor   = "swap/rename-predecessor"
	StepRenameNext          = "swap/rename-next"
	StepWindow              = "swap/window" // WithWindow's function, predecessors stopped
	StepStart               = "swap/start"
	StepHold                = "swap/hold-ports"
	StepAwaitPorts          = "swap/await-ports"
	StepRelease             = "swap/release-ports"
	StepWaitHealthy         = "wait-healthy"
	StepStopNew             = "rollback/stop-new"
	StepRenameNew           = "rollback/rename-new"
	StepRestorePredecessor  = "rollback/restore-predecessor"
	StepRollbackWindow      = "rollback/window" // WithWindow's function, the mesh's stopped
	StepStartPredecessor    = "rollback/start-predecessor"
	StepRemoveNew           = "rollback/remove-new"
	StepRemovePredecessor   = "prune/remove-predecessor"
	StepStartBeside         = "overlap/start-beside"
	StepSteer               = "overlap/steer-ports"
	StepDrainConnections    = "overlap/drain-connections"
	StepDrainPredecessor    = "overlap/drain-predecessor"
	defaultRollbackStopWait = 10 * time.Second
)

// Spec is the module's container as the mesh wants it. Environment variables
// are left out on purpose: a Spec travels in the workflow history.
type Spec struct {
	Name  string   `json:"name"`
	Image string   `json:"image"`
	Cmd   []string `json:"cmd,omitempty"`
	// Ports maps a host port "[IP:]PORT/PROTO" to a container port
	// "PORT/PROTO", e.g. "8025/tcp" -> "25/tcp".
	Ports map[string]string `json:"ports,omitempty"`
	// Healthcheck, when set, is the container's Docker healthcheck; when nil
	// the image's own applies, if it has one.
	Healthcheck *Healthcheck `json:"healthcheck,omitempty"`
	// RestartPolicy ("no", "always", "unless-stopped", "on-failure[:N]");
	// empty means the predecessor's, or unless-stopped for a new service.
	RestartPolicy string `json:"restart_policy,omitempty"`
	// Env overrides the predecessor's environment. Its values are read on
	// the node and never serialised.
	Env map[string]string `json:"-"`
	// Labels override the predecessor's labels.
	Labels map[string]string `json:"labels,omitempty"`
	// Keep names variables and labels whose predecessor's value stays
	// over Env and Labels.
	Keep []string `json:"keep,omitempty"`
	// Takes are the operator's decisions on conflicting variables and
	// labels, by key ("env:NAME", "label:NAME"): take "node" (the
	// predecessor's value stays) or "mesh" (the module's).
	Takes map[string]string `json:"takes,omitempty"`
	// DropPorts are host ports "PORT/PROTO" a predecessor publishes that
	// the module deliberately stops publishing.
	DropPorts []string `json:"drop_ports,omitempty"`
	// Replaces names predecessors of other names the module takes over.
	Replaces []string `json:"replaces,omitempty"`
	// Cutover is "overlap" for a module whose new container starts beside
	// its predecessor (see Overlap); empty for the swap.
	Cutover string `json:"cutover,omitempty"`
	// Exclusive names volumes one instance at a time may use: an overlap
	// refuses them.
	Exclusive []string `json:"exclusive,omitempty"`
	// ReplacesUnit is a predecessor that is a system unit on the node,
	// handed over by the swap (unit.go).
	ReplacesUnit string `json:"replaces_unit,omitempty"`
}

// CutoverOverlap is Spec.Cutover for the overlap cutover.
const CutoverOverlap = "overlap"

// Healthcheck is a Docker healthcheck; Test is as in a Dockerfile's
// HEALTHCHECK, e.g. {"CMD", "/svc", "-check", "http://127.0.0.1:8080/health"}.
type Healthcheck struct {
	Test        []string      `json:"test"`
	Interval    time.Duration `json:"interval,omitempty"`
	Timeout     time.Duration `json:"timeout,omitempty"`
	StartPeriod time.Duration `json:"start_period,omitempty"`
	Retries     int           `json:"retries,omitempty"`
}

// Predecessor is cutoverwire.Predecessor.
type Predecessor = cutoverwire.Predecessor

// Carried is cutoverwire.Carried.
type Carried = cutoverwire.Carried
