/**
 * The shapes of the jupyter_quota REST API, served under `{base_url}quota/v1`.
 *
 * Names follow Kubernetes and the Python side: a `namespace` has a `balance`;
 * a `balance` has `resources`, each with `hard`, `used` and `remaining`.
 * Quantities stay Kubernetes quantity strings (`"4"`, `"500m"`, `"64Gi"`).
 */

/**
 * `GET namespaces`: the namespaces the current user may see.
 */
export interface INamespaceList {
  namespaces: INamespaceSummary[];
}

/**
 * One namespace the user belongs to, with its team and current balance.
 */
export interface INamespaceSummary {
  name: string;
  team: string;
  balance: IBalance;
}

/**
 * A quota key such as `requests.nvidia.com/gpu`, `requests.cpu` or
 * `limits.memory`, mapped to a quantity string.
 */
export interface IResourceList {
  [key: string]: string;
}

/**
 * How much of one quota key is allowed, in use, and left.
 */
export interface IResourceBalance {
  hard: string;
  used: string;
  remaining: string;
}

/**
 * A quota key the quota declares but does not enforce for pods, or another
 * condition the user should know about.
 */
export interface IBalanceWarning {
  resource: string;
  message: string;
}

/**
 * One ResourceQuota of the namespace and the balance of each key it limits.
 */
export interface IQuotaBalance {
  name: string;
  scopes?: string[];
  scopeSelector?: { [key: string]: unknown };
  resources: { [key: string]: IResourceBalance };
}

/**
 * A Kubernetes object passed through as JSON (the LimitRange spec).
 */
export interface IKubeObject {
  [key: string]: unknown;
}

/**
 * `GET namespaces/{namespace}/balance`: the team's quota balance, served from
 * the backend's cache (`stale` is true when that cache could not be refreshed).
 */
export interface IBalance {
  namespace: string;
  team: string;
  /**
   * Per quota key, the tightest over the quotas that apply to an ordinary pod.
   */
  resources: { [key: string]: IResourceBalance };
  /** Each ResourceQuota behind `resources`. */
  quotas?: IQuotaBalance[];
  /** Quota keys Kubernetes accepts but never enforces. */
  warnings?: IBalanceWarning[];
  /** The namespace's LimitRange, or null when it has none. */
  limitRange?: IKubeObject | null;
  /** RFC 3339 UTC time the balance was read. */
  observedAt: string;
  stale: boolean;
}

/**
 * The phase of a job, as Kubernetes reports a pod's.
 */
export type JobPhase = 'Pending' | 'Running' | 'Succeeded' | 'Failed';

/**
 * A fine-tuning job that runs under a team's quota.
 */
export interface IJob {
  name: string;
  namespace: string;
  team?: string;
  owner: string;
  phase: JobPhase;
  /** The argv given to the trainer (never a shell string). */
  args: string[];
  gpus: number;
  /** GPU indices the job holds (local backend only). */
  gpuIndices?: number[];
  resources: { requests: IResourceList; limits: IResourceList };
  /** RFC 3339 UTC times. */
  createdAt: string;
  startedAt?: string | null;
  finishedAt?: string | null;
  exitCode?: number | null;
  /** A short CamelCase code (`ExceededQuota`, `BackoffLimitExceeded`). */
  reason?: string | null;
  message?: string | null;
}

/**
 * The body of every error the API returns.
 */
export interface IApiError {
  /** A short CamelCase code such as `ExceededQuota` or `NotFound`. */
  reason: string;
  /** A message a person can act on. */
  message: string;
}

/**
 * `GET namespaces/{namespace}/jobs`: the namespace's jobs, newest first.
 */
export interface IJobList {
  jobs: IJob[];
  /** Kubernetes' ListMeta: both absent on the last page. */
  metadata?: { continue?: string; remainingItemCount?: number };
}

/**
 * Which page of `GET namespaces/{namespace}/jobs` to read: `limit` jobs (1 to
 * 1000; the server's `job_list_limit` when absent), after the page whose
 * `metadata.continue` this is.
 */
export interface IJobPage {
  limit?: number;
  continue?: string;
}

/** The largest `limit` the server accepts (`MAX_LIMIT` in `jupyter_quota/paging.py`). */
export const MAX_JOB_PAGE = 1000;

/**
 * `GET namespaces/{namespace}/jobs/{name}/logs`: the tail of a job's output.
 */
export interface IJobLogs {
  name: string;
  namespace: string;
  tailLines?: number;
  logs: string;
}

/**
 * `POST namespaces/{namespace}/jobs`: what to run and what it asks for.
 */
export interface IJobRequest {
  name?: string;
  args: string[];
  gpus?: number;
  resources?: { requests?: IResourceList; limits?: IResourceList };
}

/**
 * `GET identity`: who the server takes the caller to be.
 */
export interface IIdentity {
  name: string;
  groups: string[];
  admin: boolean;
  source?: string;
  namespaces: string[];
  backend: string;
}

/**
 * `GET inventory`: what jobs run on.
 */
export interface IInventory {
  source: string;
  gpus?: { index: number; model: string; memory: string }[];
  cpu?: string;
  memory?: string;
}

/**
 * `GET models`: one model of the estimator's offline catalog.
 */
export interface IModelInfo {
  id: string;
  params: number;
  layers?: number;
  hidden?: number;
  experts?: number;
  vision?: boolean;
  maxLength?: number | null;
}

export interface IModelList {
  models: IModelInfo[];
}

/**
 * The parts of an estimate's peak GPU memory, in bytes per GPU.
 */
export interface IBreakdown {
  weights: number;
  gradients: number;
  optimizer: number;
  activations: number;
  logits: number;
  overhead: number;
}

/**
 * `POST estimate`: the peak GPU memory a `swift sft` run needs on each GPU.
 */
export interface IEstimate {
  peak_bytes_per_gpu: number;
  peak_gib_per_gpu: number;
  breakdown: IBreakdown;
  assumptions?: string[];
  model?: unknown;
  gpus?: number;
  args?: string[];
}

/**
 * One way to run a fine-tune: its ms-swift argv, GPUs, pod resources and estimate.
 */
export interface IPlan {
  args: string[];
  gpus: number;
  resources: { requests: IResourceList; limits: IResourceList };
  estimate: IEstimate;
  /** What the planner changed from the user's arguments, and why. */
  changes?: unknown[];
}

/**
 * `POST namespaces/{namespace}/plan`: the best plan that fits, the others, and
 * the candidates that do not fit with the reason.
 */
export interface IPlanResult {
  recommended: IPlan | null;
  candidates: IPlan[];
  rejected: { plan: IPlan; reason: string }[];
}

/**
 * A team profile (openapi.yaml's `Profile`; every field's help is on
 * `jupyter_quota.profiles.TeamProfile`). `GET profiles/{team}` answers every
 * field; `PUT profiles/{team}` replaces the whole profile (admins only).
 */
export interface IProfile {
  team?: string;
  namespace?: string;
  displayName?: string;
  users?: string[];
  groups?: string[];
  /** The team's ResourceQuota `spec.hard`: quota key to quantity string. */
  hard?: IResourceList;
  scopes?: string[];
  scopeSelector?: IKubeObject;
  quotaName?: string;
  extraQuotas?: IKubeObject[];
  limitRange?: IKubeObject;
  limitRangeName?: string;
  /** The GPUs' extended resource name (`nvidia.com/gpu` unless set). */
  gpuResource?: string;
  gpuModel?: string;
  gpuMemory?: string;
  nodeSelector?: { [key: string]: string };
  tolerations?: IKubeObject[];
  priorityClassName?: string;
  image?: string;
}

/**
 * `GET profiles`: every team profile (admins only).
 */
export interface IProfileList {
  profiles: IProfile[];
}
