package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=upol,categories=nodehealth
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetVersion`,description="The pinned version (empty: each node's offered version)"
// +kubebuilder:printcolumn:name="Paused",type=boolean,JSONPath=`.spec.paused`,description="No node starts while paused"
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`,description="Nodes the policy governs"
// +kubebuilder:printcolumn:name="Updated",type=integer,JSONPath=`.status.upToDate`,description="Governed nodes on the target version"
// +kubebuilder:printcolumn:name="In-flight",type=integer,JSONPath=`.status.inFlight`,description="Governed nodes that count as updating"
// +kubebuilder:printcolumn:name="Others",type=integer,JSONPath=`.status.others`,description="Selected nodes leaving or under another tool's maintenance (with countNotReady: also not ready), counted toward the limits"
// +kubebuilder:printcolumn:name="Failed",type=integer,JSONPath=`.status.failed`,description="Governed nodes whose failure halts the policy"
// +kubebuilder:printcolumn:name="Halted",type=string,JSONPath=`.status.conditions[?(@.type=="Halted")].status`,description="True while a failure halts the policy"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// UpdatePolicy is a rollout policy: which managed nodes it governs, the
// version they go to, how many update at once and when. A node is governed
// by the one policy whose nodeSelector selects it; a node two policies
// select, or none, is never started. It is cluster-scoped; the update
// operator reads spec and writes status.
type UpdatePolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the rollout a user asks for.
	Spec UpdatePolicySpec `json:"spec"`

	// Status is what the update operator last observed of the nodes the
	// policy governs.
	// +optional
	Status UpdatePolicyStatus `json:"status,omitempty"`
}

// UpdatePolicySpec is written by users.
// +kubebuilder:validation:XValidation:rule="!has(self.ignoreWaves) || !self.ignoreWaves || (has(self.targetVersion) && size(self.targetVersion) > 0)",message="ignoreWaves needs targetVersion: only a pinned version is taken ahead of its wave"
// +kubebuilder:validation:XValidation:rule="!has(self.ignoreWaves) || !self.ignoreWaves || !has(self.minReleaseAge) || duration(self.minReleaseAge) == duration('0s')",message="ignoreWaves takes the pin before its wave offers it, and minReleaseAge waits until it has been offered for that long: set one of them"
type UpdatePolicySpec struct {
	// NodeSelector selects, among the update operator's managed nodes, the
	// nodes this policy governs; {} selects every managed node.
	NodeSelector *metav1.LabelSelector `json:"nodeSelector"`

	// TargetVersion pins the Bottlerocket version every governed node is
	// updated to (for example "1.20.3"). Empty means each node goes to the
	// version its own Bottlerocket API offers. A node newer than the pin is
	// never downgraded; changing the pin affects only nodes that have not
	// started their update. A version as Bottlerocket writes it:
	// MAJOR.MINOR[.PATCH], an optional leading "v", pre-release and build
	// suffixes ("1.20.3", "v1.21.0-rc1").
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^(v?(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(\.(0|[1-9][0-9]*))?(-[0-9A-Za-z.-]+)?(\+[0-9A-Za-z.-]+)?)?$`
	TargetVersion string `json:"targetVersion,omitempty"`

	// IgnoreWaves lets governed nodes take TargetVersion before
	// Bottlerocket's wave reaches them: while a node updates, its agent
	// sets settings.updates.ignore-waves (the only way to take a version
	// ahead of its wave) and restores it afterwards, as it does the version
	// lock. Only with TargetVersion.
	// +optional
	IgnoreWaves bool `json:"ignoreWaves,omitempty"`

	// Paused stops governed nodes from starting an update; nodes in flight
	// finish. Defaulted, so that the PAUSED column of kubectl get shows it.
	// +optional
	// +kubebuilder:default=false
	Paused bool `json:"paused,omitempty"`

	// MaxConcurrentUpdates is how many governed nodes may count as updating
	// at once: a count (at least 1) or a percentage of the governed nodes
	// (1% to 100%, rounded down, but at least one node).
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",message="must be a count of at least 1 or a percentage from 1% to 100%"
	MaxConcurrentUpdates intstr.IntOrString `json:"maxConcurrentUpdates"`

	// MaxConcurrentUpdatesPerZone additionally limits updates within one
	// topology.kubernetes.io/zone: a count or a percentage of the zone's
	// governed nodes. Unset means no per-zone limit.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",message="must be a count of at least 1 or a percentage from 1% to 100%"
	MaxConcurrentUpdatesPerZone *intstr.IntOrString `json:"maxConcurrentUpdatesPerZone,omitempty"`

	// CountNotReady makes the limits also count the selected nodes that are
	// not Ready, or that the node-health controller gates for a failure
	// (its readiness taint with SystemExtensionsReady False for a reason
	// other than PlannedMaintenance), and are not updating by this
	// operator. The limits always count the selected nodes that are leaving
	// or under someone else's maintenance (status.others): one disruption
	// budget across tools. Default false.
	// +optional
	CountNotReady bool `json:"countNotReady,omitempty"`

	// Windows are the times at which governed nodes may start an update;
	// empty means always. Nodes already updating finish outside a window.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Windows []UpdateWindow `json:"windows,omitempty"`

	// PostRebootSoak is how long a node must stay fully ready (every system
	// extension ready, and Ready) after its reboot before its update counts
	// as healthy and its slot frees. It must be shorter than the operator's
	// MonitoringUpdate deadline. Default 5m.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must not be negative"
	PostRebootSoak *metav1.Duration `json:"postRebootSoak,omitempty"`

	// MinReleaseAge holds a version back until it has been offered for this
	// long: its clock starts when the operator first sees one of the
	// policy's nodes report the version offered (status.offeredVersions
	// records when), so a release pulled within that time never reaches the
	// policy's nodes. It applies to a pinned targetVersion too, which
	// therefore must be offered to some node of the policy first. Unset or
	// 0: no wait. At most 30 days.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must not be negative"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('720h')",message="must be at most 30 days (720h)"
	MinReleaseAge *metav1.Duration `json:"minReleaseAge,omitempty"`

	// DelayBetweenNodes is how long, after an update this policy started
	// passed its health gate, the policy waits before it starts the next
	// one (status.lastUpdateSucceeded records when the last one passed).
	// Nodes already in flight are not held. Unset or 0: no wait. At most
	// 24 hours.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s')",message="must not be negative"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('24h')",message="must be at most 24 hours (24h)"
	DelayBetweenNodes *metav1.Duration `json:"delayBetweenNodes,omitempty"`

	// Drain tunes the drain before each reboot of the policy's nodes; an
	// unset field takes the operator configuration's drain.
	// +optional
	Drain *PolicyDrain `json:"drain,omitempty"`

	// Gates are external conditions a start waits for, checked before
	// each start; only a firing alert of gates.alerts that names a node in
	// its soak acts on a node in flight (it fails the node's health gate).
	// +optional
	Gates *PolicyGates `json:"gates,omitempty"`

	// Hooks are commands the operator runs as Jobs for each node of the
	// policy: beforeDrain once the node is ready to be drained (the drain
	// begins only after it succeeded), afterReboot once the node rebooted
	// into the update and is fully ready (the update passes its health
	// gate only after it succeeded). A hook that fails or times out fails
	// the update and halts the policy. The Jobs run in the namespace and
	// under the service account the operator's configuration names
	// (hooks.namespace, hooks.serviceAccountName), never ones a policy
	// chooses; without them a policy with hooks starts nothing.
	// +optional
	Hooks *PolicyHooks `json:"hooks,omitempty"`

	// OnHealthGateFailure is what the operator does when a node of the
	// policy rebooted into its update and did not pass the health gate
	// within the MonitoringUpdate deadline. Halt (the default) records the
	// failure and halts the policy. Rollback records the failure and halts
	// the policy too, then updates the node back to the version it ran
	// before (annotation updates.nodehealth.io/rollback names the version
	// left), with the usual drain and reboot; the node ends Idle on the old
	// version and is never updated to the failed version again until a
	// person removes that annotation. At most one rollback per failure; a
	// failed rollback halts with no further action. Other failures (a
	// drain that cannot finish, the wrong version after the reboot, a
	// deleted node, another state's deadline) always halt.
	// +optional
	// +kubebuilder:validation:Enum=Halt;Rollback
	// +kubebuilder:default=Halt
	OnHealthGateFailure HealthGateFailureAction `json:"onHealthGateFailure,omitempty"`
}

// PolicyGates are the external gates of a policy's starts. Each is checked
// only when the policy would start a node; a gate whose source cannot be
// read blocks the start (fail closed) and the policy's Blocked condition
// says so.
// +kubebuilder:validation:MinProperties=1
type PolicyGates struct {
	// BlockingPods holds starts back while pods that match its selectors
	// are unfinished (phase neither Succeeded nor Failed).
	// +optional
	BlockingPods *BlockingPods `json:"blockingPods,omitempty"`

	// Alerts holds starts back while an alert they match fires in an
	// Alertmanager the operator's configuration defines (alertSources);
	// a matching alert labelled node=<the node's name> that fires while
	// the node soaks after its reboot fails the node's health gate.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	Alerts []AlertGate `json:"alerts,omitempty"`
}

// PolicyHooks are the commands run around each node's drain and reboot.
// +kubebuilder:validation:MinProperties=1
type PolicyHooks struct {
	// BeforeDrain runs once the node carries the readiness taint and its
	// agent waits for the drain; the drain begins after it succeeded.
	// Example: ceph osd set noout.
	// +optional
	BeforeDrain *Hook `json:"beforeDrain,omitempty"`

	// AfterReboot runs once the node rebooted into the update and is
	// fully ready (its soak has started); the update passes its health
	// gate only after it succeeded. Example: ceph osd unset noout.
	// +optional
	AfterReboot *Hook `json:"afterReboot,omitempty"`
}

// Hook is one container the operator runs as a Job with restartPolicy
// Never and no retry (backoffLimit 0), the environment variable NODE_NAME
// set to the node's name.
type Hook struct {
	// Image is the container image.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`

	// Command is the container's entrypoint array; unset: the image's.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	Command []string `json:"command,omitempty"`

	// Args are the entrypoint's arguments; unset: the image's.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Args []string `json:"args,omitempty"`

	// Env are environment variables of the container, by name and value.
	// NODE_NAME is the operator's (the node's name) and is refused here.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:XValidation:rule="self.all(e, e.name != 'NODE_NAME')",message="NODE_NAME is set by the operator to the node's name"
	Env []HookEnvVar `json:"env,omitempty"`

	// Timeout bounds the Job (its activeDeadlineSeconds); a hook still
	// running past it fails the update. It must fit the operator's state
	// deadline of the step (rebootedIntoUpdate with the drain for
	// beforeDrain, monitoringUpdate for afterReboot): the operator refuses
	// the policy otherwise. Default 10m; from 1m to 2h.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="must be at least 1 minute (1m)"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('2h')",message="must be at most 2 hours (2h)"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// HookEnvVar is an environment variable of a hook's container.
type HookEnvVar struct {
	// Name of the variable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z][-._a-zA-Z0-9]*$`
	Name string `json:"name"`

	// Value of the variable.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Value string `json:"value,omitempty"`
}

// Names of the hooks, as their Jobs' hook label, Events and metrics have
// them.
const (
	HookBeforeDrain = "beforeDrain"
	HookAfterReboot = "afterReboot"
)

// What marks the hooks' Jobs: HookLabel, valued with the hook's name, is on
// every one (the operator's informer selects it), and HookNodeAnnotation
// names the node in full (its label is cut to what a label value holds).
const (
	HookLabel          = "updates.nodehealth.io/hook"
	HookNodeAnnotation = "updates.nodehealth.io/node"
)

// AlertGate is one query of an alert source: the firing alerts (active,
// neither silenced nor inhibited) that match every matcher.
type AlertGate struct {
	// Source is the name of an alert source of the operator's
	// configuration (alertSources[].name), which holds its URL and
	// credentials: a policy never names a URL. A name the operator does
	// not define holds every start of the policy (Blocked, reason
	// UnknownAlertSource).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Source string `json:"source"`

	// Matchers select the alerts, all of them at once, in Alertmanager's
	// matcher style (name, value, isRegex, isEqual). At least one.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Matchers []AlertMatcher `json:"matchers"`
}

// AlertMatcher is one of Alertmanager's label matchers: name=value,
// name!=value, name=~regex or name!~regex.
// +kubebuilder:validation:XValidation:rule="!self.isRegex || size(self.value) > 0",message="a regular expression must not be empty"
type AlertMatcher struct {
	// Name is the label's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[a-zA-Z_][a-zA-Z0-9_]*$`
	Name string `json:"name"`

	// Value is the label's value, or a regular expression (RE2, anchored
	// at both ends by Alertmanager) when isRegex is true.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`

	// IsRegex: value is a regular expression.
	// +optional
	IsRegex bool `json:"isRegex,omitempty"`

	// IsEqual: the label must match (true, the default) or must not
	// match (false: != or !~).
	// +optional
	// +kubebuilder:default=true
	IsEqual *bool `json:"isEqual,omitempty"`
}

// BlockingPods selects the pods, in any namespace, whose presence holds
// back the policy's starts: a backup job, a migration, a batch run that an
// update must not interrupt. The operator lists them with these selectors
// before each start (no cache), so the selectors should be specific.
// +kubebuilder:validation:XValidation:rule="has(self.anywhere) || has(self.onNode)",message="set anywhere, onNode or both"
type BlockingPods struct {
	// Anywhere: an unfinished pod that matches it, on any node or none,
	// blocks every start of the policy. An empty selector ({}) would match
	// every pod and is rejected.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="must not be empty: an empty selector matches every pod"
	Anywhere *metav1.LabelSelector `json:"anywhere,omitempty"`

	// OnNode: an unfinished pod that matches it blocks the start of the
	// node it is bound to only; the policy's other nodes may start. An
	// empty selector ({}) is rejected.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="must not be empty: an empty selector matches every pod"
	OnNode *metav1.LabelSelector `json:"onNode,omitempty"`
}

// HealthGateFailureAction is what the operator does when a node fails its
// health gate.
type HealthGateFailureAction string

const (
	// HealthGateFailureHalt records the failure and halts the policy.
	HealthGateFailureHalt HealthGateFailureAction = "Halt"
	// HealthGateFailureRollback records the failure, halts the policy and
	// updates the node back to the version it ran before.
	HealthGateFailureRollback HealthGateFailureAction = "Rollback"
)

// PolicyDrain tunes the operator's drain for one policy's nodes. Every
// field is optional; unset, the operator configuration's drain applies
// (its defaults: timeout 10m, deleteEmptyDirData true, force false, each
// pod's own grace period).
type PolicyDrain struct {
	// Timeout bounds a node's drain; past it the update fails
	// (DrainBlocked) and halts the policy. It must be shorter than the
	// operator's RebootedIntoUpdate deadline, which includes it (the
	// operator refuses the policy otherwise). At most 24 hours.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be positive"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('24h')",message="must be at most 24 hours (24h)"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// GracePeriodSeconds is passed in each eviction's DeleteOptions: how
	// long the evicted pods get to terminate (0: at once). Unset: each
	// pod's own terminationGracePeriodSeconds.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	GracePeriodSeconds *int64 `json:"gracePeriodSeconds,omitempty"`

	// DeleteEmptyDirData evicts pods with emptyDir volumes (kubectl drain
	// --delete-emptydir-data; the reboot loses the data anyway); false:
	// such a pod blocks the drain and is named.
	// +optional
	DeleteEmptyDirData *bool `json:"deleteEmptyDirData,omitempty"`

	// Force evicts pods that declare no controller (kubectl drain
	// --force); false: such a pod blocks the drain and is named.
	// +optional
	Force *bool `json:"force,omitempty"`

	// SkipPodSelector selects pods the drain leaves alone: they are
	// neither evicted nor waited for, and stop with the reboot like
	// DaemonSet pods.
	// +optional
	SkipPodSelector *metav1.LabelSelector `json:"skipPodSelector,omitempty"`
}

// UpdateWindow opens at every time Schedule fires and stays open for
// Duration.
type UpdateWindow struct {
	// Schedule is a standard 5-field cron expression (minute hour
	// day-of-month month day-of-week), or @hourly, @daily, @weekly,
	// @monthly or @yearly, evaluated in TimeZone. @every is rejected: it
	// names no instant, so the window would open at no fixed time.
	// Whitespace around it is ignored, by these rules as by the operator.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="!self.trim().startsWith('@every')",message="@every is not a schedule of instants; use a 5-field cron expression"
	// +kubebuilder:validation:XValidation:rule="!self.trim().startsWith('TZ=') && !self.trim().startsWith('CRON_TZ=')",message="set timeZone instead of a TZ= prefix"
	Schedule string `json:"schedule"`

	// Duration is how long the window stays open each time: at most 7
	// days, and at most the time between two starts of Schedule (the
	// operator checks that one and reports a longer window in the policy's
	// Halted condition, reason InvalidSpec): windows of one schedule do not
	// overlap.
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="must be positive"
	// +kubebuilder:validation:XValidation:rule="duration(self) <= duration('168h')",message="must be at most 7 days (168h)"
	Duration metav1.Duration `json:"duration"`

	// TimeZone is the IANA time zone the schedule is evaluated in (for
	// example "Europe/Berlin"); default UTC. The operator embeds the time
	// zone database; an unknown name stops the policy's starts and is
	// reported in its WindowOpen condition.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
}

// UpdatePolicyStatus is written by the update operator's leader only, and
// only when it changed.
type UpdatePolicyStatus struct {
	// ObservedGeneration is the generation of spec this status was computed
	// from: once it equals metadata.generation, the operator acts on the
	// edit (a pause, a new pin).
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Nodes is how many managed nodes the policy governs.
	// +optional
	Nodes int32 `json:"nodes"`
	// UpToDate is how many of them run the target version and are Idle.
	// +optional
	UpToDate int32 `json:"upToDate"`
	// InFlight is how many of them count as updating: this operator's
	// updates in flight.
	// +optional
	InFlight int32 `json:"inFlight"`
	// Others is how many other nodes the policy selects count toward its
	// limits besides InFlight: leaving or under someone else's maintenance
	// (a deletionTimestamp, a leaving taint, a foreign KEP-5683 lifecycle
	// condition) and, with spec.countNotReady, not ready. Each node counts
	// once, whatever its signals.
	// +optional
	Others int32 `json:"others"`
	// OtherNodes names the first of them (at most 10, in name order) with
	// the signal that counts each.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	OtherNodes []CountedNode `json:"otherNodes,omitempty"`
	// Failed is how many of them carry a failure that halts the policy.
	// +optional
	Failed int32 `json:"failed"`
	// Waiting is how many of them still have to update: not up to date, not
	// in flight, not failed.
	// +optional
	Waiting int32 `json:"waiting"`

	// HaltedBy are the nodes whose failure halts the policy, in name order;
	// `kubectl nodehealth update resume NODE` resumes one.
	// +optional
	// +listType=atomic
	HaltedBy []string `json:"haltedBy,omitempty"`

	// OfferedVersions are, while spec.minReleaseAge is set, the versions the
	// policy's nodes report offered, each with when the operator first saw
	// it offered: spec.minReleaseAge is measured from it. A version no node reports any longer is kept
	// (a pin moved back to it keeps its age); past MaxOfferedVersions the
	// versions first offered longest ago are dropped.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=version
	OfferedVersions []OfferedVersion `json:"offeredVersions,omitempty"`

	// LastUpdateSucceeded is, while spec.delayBetweenNodes is set, when an
	// update this policy started last passed its health gate:
	// spec.delayBetweenNodes is measured from it.
	// +optional
	LastUpdateSucceeded *metav1.Time `json:"lastUpdateSucceeded,omitempty"`

	// Conditions are Halted, Paused, WindowOpen, Paced, Blocked, Complete
	// and SelectorConflict.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// OfferedVersion is a version the policy's nodes are offered and since
// when.
type OfferedVersion struct {
	// Version as the nodes report it (status.targetVersion of their shadows).
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version"`
	// FirstOffered is when the operator first saw a node of the policy
	// report it offered.
	FirstOffered metav1.Time `json:"firstOffered"`
}

// MaxOfferedVersions bounds UpdatePolicyStatus.OfferedVersions; past it the
// versions first offered longest ago are dropped (and their clock starts
// again should they be seen once more).
const MaxOfferedVersions = 32

// CountedNode is a node another tool's disruption counts toward a policy's
// limits, and why.
type CountedNode struct {
	// Name is the Node's name.
	Name string `json:"name"`
	// Reason is the signal that counts it, for example "condition
	// DrainInProgress=True, reason AdminRequested, node unschedulable".
	Reason string `json:"reason"`
}

// MaxOtherNodes bounds UpdatePolicyStatus.OtherNodes: the status stays small
// in a cluster where a tool replaces hundreds of nodes at once; Others holds
// the count.
const MaxOtherNodes = 10

// Condition types of UpdatePolicyStatus.Conditions.
const (
	// PolicyHalted is True while a governed node's failure (reason
	// UpdateFailed) or an invalid spec (reason InvalidSpec) stops starts.
	PolicyHalted = "Halted"
	// PolicyPaused mirrors spec.paused.
	PolicyPaused = "Paused"
	// PolicyWindowOpen is True while an update window is open (or none is
	// set); Unknown with reason UnknownTimeZone for a time zone the
	// operator does not know.
	PolicyWindowOpen = "WindowOpen"
	// PolicyComplete is True when every governed node runs the target
	// version and none is in flight.
	PolicyComplete = "Complete"
	// PolicyPaced is True while spec.minReleaseAge or
	// spec.delayBetweenNodes holds back a start, reason ReleaseAge or
	// DelayBetweenNodes, the message naming when it may start.
	PolicyPaced = "Paced"
	// PolicyBlocked is True while spec.gates hold back a start that would
	// otherwise be made: reason BlockingPods (the message names the pods)
	// or GateUnavailable (a gate's source could not be read, so nothing
	// starts), or HooksNotConfigured (spec.hooks is set but the
	// operator's configuration names no hooks namespace and service
	// account, so nothing starts); False, reason NotBlocked, otherwise.
	PolicyBlocked = "Blocked"
	// PolicySelectorConflict is True while nodes this policy selects are
	// also selected by another policy; they are never started.
	PolicySelectorConflict = "SelectorConflict"
)

// PolicyAnnotation, written by the operator on a shadow when it starts the
// node's update, names the UpdatePolicy that started it: a failure of that
// update halts that policy, and its postRebootSoak applies, even if the
// node's labels change meanwhile.
const PolicyAnnotation = "updates.nodehealth.io/policy"

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// UpdatePolicyList is a list of UpdatePolicies.
type UpdatePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []UpdatePolicy `json:"items"`
}
