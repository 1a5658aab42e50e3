"""The reason codes a job carries (the ``reason`` of the job dict in ``backends.base``).

Each is named once here and imported by both backends, in the style of Kueue's condition
reasons: one constant, one line saying when a job has it. The sidebar's wording for each is
in ``src/jobs.ts``.
"""

#: Pending: no node could ever hold the job's requests.
UNSCHEDULABLE = "Unschedulable"
#: Pending: the job fits a node, but not beside the jobs running now.
WAITING = "WaitingForResources"
#: Running: the job is ending (cancelled, or its processes still being killed).
TERMINATING = "Terminating"
#: Failed: a user cancelled the job.
CANCELLED = "Cancelled"
#: Failed: the trainer could not be started (e.g. its command was not found).
START_ERROR = "StartError"
#: Failed: the trainer exited with a non-zero code (the message says which, and its last log line).
ERROR = "Error"
#: Failed: the job's process ended without recording an exit code.
LOST = "Lost"
#: Failed: the job's stored requests cannot be read.
INVALID_JOB = "InvalidJob"
