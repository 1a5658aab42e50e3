"""Every label and annotation key jupyter_quota writes or reads, named once.

In the style of Kueue's ``pkg/controller/constants``: one constant, one comment saying what it
marks and who reads it. The keys Kubernetes itself sets are here too, so that no key is spelled in
two places. ``tests/test_labels.py`` checks that no other module spells one.
"""

# -- ours: on the namespaces, quota objects, Roles, Jobs and pods jupyter_quota creates ---------

#: Marks an object as ours (value ``MANAGED_BY_VALUE``): the kube backend watches only Jobs and
#: pods with it (``backends/kube/cache.py``), and ``profiles apply`` compares it (``apply.py``).
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGED_BY_VALUE = "jupyter-quota"
#: The label selector of every object we manage.
MANAGED_SELECTOR = f"{MANAGED_BY}={MANAGED_BY_VALUE}"
#: The prefix of our own keys; ``profiles apply`` treats every label under it as ours.
PREFIX = "jupyter-quota/"
#: The team a namespace or Job belongs to; the kube job view shows it as the job's ``team``.
TEAM = PREFIX + "team"
#: The submitting user, made a label value (``jobspec.label_value``): a selector for a user's jobs.
USER = PREFIX + "user"
#: The job's name, on the Job and its pods (the job controller's ``job-name`` may be cut).
JOB = PREFIX + "job"
#: The job's priority (``priority.PRIORITIES``), on the Job and its pods: the local scheduler reads it
#: from the admitted pod (``backends/local/admission.py``), both job views show it as ``priority``.
PRIORITY = PREFIX + "priority"
#: What a Job is when it is not a fine-tune: ``KIND_ENDPOINT`` marks a job that serves a model
#: (``swift deploy``), on the Job and its pods; the job views show it as ``kind``, and
#: ``service/endpoints.py`` lists the namespace's endpoints by it.
KIND = PREFIX + "kind"
KIND_ENDPOINT = "endpoint"
#: Annotation: the submitting user as given (any characters); the job view's ``owner``.
OWNER = PREFIX + "owner"
#: Annotation: the user's trainer arguments as a JSON list; both backends' job views show them as ``args``.
ARGS = PREFIX + "args"
#: Annotation (Kubernetes): a requeued Job's elastic events as a JSON list (preempted, requeued),
#: carried from Job to Job; the job view shows them as ``history`` (``backends/kube/preemption.py``).
HISTORY = PREFIX + "history"

# -- Kubernetes': set by its controllers, read by us ---------------------------------------------

#: Set by the job controller on a Job's pods: the kube backend finds a Job's pods by it.
JOB_NAME = "job-name"
#: The same, under the batch prefix (Kubernetes 1.27+); ``quota.job_pod`` sets both, as the controller does.
BATCH_JOB_NAME = "batch.kubernetes.io/job-name"
#: Set by the job controller on a Job's pods: the uid of the Job that made them (a re-created Job is another).
CONTROLLER_UID = "controller-uid"
#: Annotation the job controller sets on an Indexed Job's pods: the completion index.
JOB_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
#: Annotation the LimitRanger admission plugin sets on a pod it defaulted; ``limitrange`` writes it the same way.
LIMIT_RANGER = "kubernetes.io/limit-ranger"

# -- Kueue's: set by us on Jobs when Kueue is in use (``JupyterQuota.kueue_queue``), read by Kueue --

#: The LocalQueue a Job is queued in (Kueue's ``constants.QueueLabel``); Kueue admits only Jobs
#: that carry it, and unsuspends them when their ClusterQueue has quota (``jupyter_quota/kueue.py``).
KUEUE_QUEUE_NAME = "kueue.x-k8s.io/queue-name"
#: The WorkloadPriorityClass of a Job (Kueue's ``constants.WorkloadPriorityClassLabel``): its
#: priority when Kueue admits and preempts (``kueue.class_name``).
KUEUE_PRIORITY_CLASS = "kueue.x-k8s.io/priority-class"
