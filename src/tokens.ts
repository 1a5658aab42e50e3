/**
 * The shapes of the jupyter_quota REST API, served under `{base_url}quota/v1`.
 *
 * Every shape is a schema of `jupyter_quota/openapi.yaml`, generated into
 * `api.gen.ts` by `npm run gen:types` (a Jest test fails when that file is
 * out of date); this module only names them for the rest of the frontend.
 * Names follow Kubernetes and the Python side: a `namespace` has a `balance`;
 * a `balance` has `resources`, each with `hard`, `used` and `remaining`.
 * Quantities stay Kubernetes quantity strings (`"4"`, `"500m"`, `"64Gi"`).
 */

import type { components, operations } from './api.gen';

type Schemas = components['schemas'];

/** `GET namespaces`: the namespaces the current user may see. */
export type INamespaceList = Schemas['NamespaceList'];

/** One namespace the user belongs to: its team, GPU resource and current balance. */
export type INamespaceSummary = Schemas['NamespaceSummary'];

/** A quota key or resource name (`requests.nvidia.com/gpu`, `cpu`) mapped to a quantity string. */
export type IResourceList = Schemas['Quantities'];

/** How much of one quota key is allowed (`hard`), in use (`used`) and `remaining`. */
export type IResourceBalance = Schemas['ResourceBalance'];

/** `GET namespaces/{namespace}/balance`: the team's quota balance, from the backend's cache. */
export type IBalance = Schemas['Balance'];

/** A quota key Kubernetes accepts but never enforces for pods. */
export type IBalanceWarning = NonNullable<IBalance['warnings']>[number];

/** One ResourceQuota of the namespace and the balance of each key it limits. */
export type IQuotaBalance = NonNullable<IBalance['quotas']>[number];

/** A Kubernetes object passed through as JSON (a LimitRange spec, a toleration). */
export type IKubeObject = Record<string, unknown>;

/** A fine-tuning job that runs under a team's quota. */
export type IJob = Schemas['Job'];

/** A job that serves a model (`swift deploy`): its phase, URL and models. */
export type IEndpoint = Schemas['Endpoint'];

/** `POST namespaces/{namespace}/endpoints`: what to serve (`args`, or a finished fine-tune's `job`). */
export type IEndpointRequest = Schemas['EndpointRequest'];

/** The phase of a job, as Kubernetes reports a pod's. */
export type JobPhase = IJob['phase'];

/** The body of every error the API returns: a CamelCase `reason` and a `message`. */
export type IApiError = Schemas['Error'];

/** `GET namespaces/{namespace}/jobs`: a page of the namespace's jobs, newest first. */
export type IJobList = Schemas['JobList'];

/**
 * Which page of `GET namespaces/{namespace}/jobs` to read: `limit` jobs (1 to
 * 1000; the server's `job_list_limit` when absent), after the page whose
 * `metadata.continue` this is.
 */
export type IJobPage = NonNullable<
  operations['listJobs']['parameters']['query']
>;

/** The largest `limit` the server accepts (`MAX_LIMIT` in `jupyter_quota/paging.py`). */
export const MAX_JOB_PAGE = 1000;

/** `GET namespaces/{namespace}/jobs/{name}/logs`: the tail of a job's output. */
export type IJobLogs = Schemas['JobLogs'];

/** `POST namespaces/{namespace}/jobs`: what to run and what it asks for. */
export type IJobRequest = Schemas['JobRequest'];

/** `GET identity`: who the server takes the caller to be. */
export type IIdentity = Schemas['Identity'];

/** `GET inventory`: what jobs run on. */
export type IInventory = Schemas['Inventory'];

/** `GET models`: one model of the estimator's offline catalog. */
export type IModelInfo = Schemas['ModelInfo'];
export type IModelList = Schemas['ModelList'];

/** The parts of an estimate's peak GPU memory, in bytes per GPU. */
export type IBreakdown = Schemas['Breakdown'];

/** `POST estimate`: the peak GPU memory a `swift sft` run needs on each GPU. */
export type IEstimate = Schemas['Estimate'];

/** One way to run a fine-tune: its ms-swift argv, GPUs, pod resources, estimate and changes. */
export type IPlan = Schemas['Plan'];

/** One setting a plan changed from the request (`field`, `from`, `to`), and why. */
export type IPlanChange = Schemas['PlanChange'];

/** `POST namespaces/{namespace}/plan`: the best plan that fits, the others, the rejected. */
export type IPlanResult = Schemas['PlanResult'];

/** `POST verifications`, `GET verifications/{id}`: a simulated training step of an argv. */
export type IVerification = Schemas['Verification'];

/** A job's estimate and the peak ms-swift measured (`memory`; docs/estimator.md §12). */
export type IJobMemory = Schemas['JobMemory'];

/** `GET estimator/errors`: estimate against measured peak, per model family and regime. */
export type IEstimatorErrors = Schemas['EstimatorErrors'];

/**
 * A team profile (every field's help is on `jupyter_quota.profiles.TeamProfile`).
 * `GET profiles/{team}` answers every field; `PUT profiles/{team}` replaces the
 * whole profile (admins only).
 */
export type IProfile = Schemas['Profile'];

/** `GET profiles`: every team profile (admins only). */
export type IProfileList = Schemas['ProfileList'];

/** How `GET usage` groups its rows: per team (namespace), per user, or per job. */
export type UsageBy = Schemas['UsageReport']['by'];

/** Resources integrated over time (GPU-, CPU-, memory GiB-seconds), and their cost with prices. */
export type IUsageTotals = Schemas['UsageFigures'];

/** One row of `GET usage`: a group (and its bucket's `start`, with `step`) and what it used. */
export type IUsageRow = Schemas['UsageRow'];

/** `GET usage`: the window, the grouping, the rows and their totals, and the prices used. */
export type IUsage = Schemas['UsageReport'];

/** A chargeback's figures: hours and cost of each resource, and their total cost (null without prices). */
export type IChargebackFigures = Schemas['ChargebackFigures'];

/** `GET chargeback?month=`: a month's usage and cost per team, and the totals row (admins only). */
export type IChargeback = Schemas['Chargeback'];

/** `POST namespaces/{namespace}/increases`: more of the team's quota, for some hours, and why. */
export type IIncreaseRequest = Schemas['IncreaseRequest'];

/** A temporary increase request: Pending, Approved (until `expiresAt`), Denied or Expired. */
export type IIncrease = Schemas['Increase'];

/** `GET increases`: the requests of the user's teams (every team's for an admin). */
export type IIncreaseList = Schemas['IncreaseList'];

/** `GET audit`: the append-only audit log, oldest first (admins). */
export type IAuditLog = Schemas['AuditLog'];
export type IAuditEntry = Schemas['AuditEntry'];

/** One row of `GET recommendations`: a team's resource, its quota now, the quota recommended, and why. */
export type IRecommendation = Schemas['Recommendation'];

/** `GET recommendations`: a row per team and quota resource (admins: every team). */
export type IRecommendationList = Schemas['RecommendationList'];

/** A row's demand and what ran over the window (`GET recommendations?series=true`). */
export type IDemandSeries = Schemas['DemandSeries'];

/** `POST replay`: the proposed profiles, and the window and cluster size to replay. */
export type IReplayRequest = Schemas['ReplayRequest'];

/** `POST replay`: per team waits, utilization, borrowing; with `curve`, the capacity curve. */
export type IReplay = Schemas['Replay'];

/** The replays at several cluster sizes: the worst p90 wait and the cost at each. */
export type ICapacityCurve = Schemas['CapacityCurve'];
