"""The reason codes a job carries (the ``reason`` of the job dict in ``backends.base``), and those
of a refused submit (``errors.AdmissionDenied``).

Each is named once here and imported by both backends, in the style of Kueue's condition
reasons: one constant, one line saying when a job has it. The sidebar's wording for each is
in ``src/jobs.ts``. Label and annotation keys are in ``labels``.
"""

#: Pending: no node could ever hold the job's requests.
UNSCHEDULABLE = "Unschedulable"
#: Pending: the job fits a node, but not beside the jobs running now.
WAITING = "WaitingForResources"
#: Running: the job is ending (cancelled, or its processes still being killed).
TERMINATING = "Terminating"
#: Failed: a user cancelled the job.
CANCELLED = "Cancelled"
#: Failed, and the endpoint Stopped: no request reached the endpoint for ``endpoint_idle_minutes``,
#: so the service stopped it and its quota went back to the team (``service/endpoints.py``).
IDLE = "Idle"
#: Failed: the trainer could not be started (e.g. its command was not found).
START_ERROR = "StartError"
#: Failed: the trainer exited with a non-zero code (the message says which, and its last log line).
ERROR = "Error"
#: Failed: the job's process ended without recording an exit code.
LOST = "Lost"
#: Failed: the trainer died of CUDA out-of-memory (its log says so; jobmemory.py).
OUT_OF_MEMORY = "OutOfMemory"
#: Failed: the kernel killed the training container for passing its memory limit (Kubernetes'
#: container reason; the message names the limit).
OOM_KILLED = "OOMKilled"
#: Failed: the node cannot get the job's image (Kubernetes' container waiting reasons; the job
#: fails at once, naming the image, instead of waiting Pending for an image that will not come).
IMAGE_PULL_FAILURES = ("ErrImageNeverPull", "ImagePullBackOff", "ErrImagePull", "InvalidImageName")
#: Failed: the job's stored requests cannot be read.
INVALID_JOB = "InvalidJob"

# -- why a submit was refused (``errors.AdmissionDenied.reason``; the 403 body's ``reason``) ------
# The API server's own words for its quota and LimitRange admission plugins, so that a refusal reads
# the same from either backend and from a Job's ``FailedCreate`` event (``backends/kube/backend.py``
# maps the API server's text back to these).

#: A ResourceQuota's hard limit would be passed (``exceeded quota: ...``).
EXCEEDED_QUOTA = "ExceededQuota"
#: A quota limits a resource the pod does not state (``failed quota: ...``).
FAILED_QUOTA = "FailedQuota"
#: A quota has no ``status.used`` yet for a resource it limits.
QUOTA_STATUS_UNKNOWN = "QuotaStatusUnknown"
#: A resource or scope is limited by configuration but no quota covers it.
INSUFFICIENT_QUOTA = "InsufficientQuota"
#: The pod's usage of a resource is negative.
QUOTA_USAGE_NEGATIVE = "QuotaUsageNegative"
#: Refusals by the quota being full (not a broken request): demand the quota hid.
QUOTA_REFUSALS = (EXCEEDED_QUOTA, INSUFFICIENT_QUOTA)
#: The pod breaks its namespace's LimitRange (min, max, ratio).
LIMIT_RANGE_VIOLATION = "LimitRangeViolation"
#: Any other refusal; also the reason of ``errors.Forbidden``.
FORBIDDEN = "Forbidden"

# -- Kubernetes' event and condition reasons we read ----------------------------------------------

#: The job controller's event when the API server refused one of a Job's pods; a Pending kube job
#: shows its reason and message (``backends/kube/jobview.py``).
FAILED_CREATE = "FailedCreate"

# -- elastic quota (``elastic``): why a job waits, why one was preempted --------------------------

#: Pending: the job does not fit its team's quota now (high and normal jobs: the nominal quota;
#: best-effort jobs: the nominal quota plus the borrowing limit).
WAITING_FOR_QUOTA = "WaitingForQuota"
#: Pending: a best-effort job over its team's quota waits for other teams' quota to go unused.
WAITING_FOR_BORROWING = "WaitingForBorrowing"
#: Pending: the job preempted others to make room and waits for them to end (their grace period).
WAITING_FOR_PREEMPTION = "WaitingForPreemption"
#: Running, then Pending: the team whose quota the job borrowed needs it back.
RECLAIMED = "Reclaimed"
#: Running, then Pending: a higher-priority job of the same team needs the job's GPUs.
PREEMPTED_BY_PRIORITY = "PreemptedByPriority"
#: Running, then Pending (Kubernetes): the cluster's scheduler deleted the job's pod to make room for
#: a higher-priority pod (PriorityClass preemption; also the reason of the scheduler's event on the
#: pod). The service requeues it to resume from its last checkpoint (``backends/kube/preemption.py``).
PREEMPTED = "Preempted"
#: Running, then Pending: a quota window with ``onClose: preempt`` closed and the team was over.
WINDOW_CLOSED = "WindowClosed"
#: Pending: the job was preempted and waits to resume from its last checkpoint (the message says which).
REQUEUED = "Requeued"

# -- endpoints (``service/endpoints.py``): why a call was refused ------------------------------------

#: 409: a call through the proxy to an endpoint that is not Ready (Pending, Starting, Stopped, Failed).
NOT_READY = "NotReady"
#: 409: an endpoint asked to serve a job that is not a finished fine-tune with a checkpoint
#: (not Succeeded, or its log names no checkpoint; ``servejob``).
NOT_SERVABLE = "NotServable"

# -- increase requests (``increaseservice``) --------------------------------------------------------

#: 409: the increase request was approved or denied already (or expired); only a Pending one is decided.
ALREADY_DECIDED = "AlreadyDecided"
