/**
 * The typed REST client of `{base_url}quota/v1`: one method per route, each
 * throwing `QuotaApiError` with the server's `{reason, message}`.
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { ConditionalGet } from './conditional';
import { IQuotaClient } from './model';
import { requestAPI } from './request';
import {
  chargebackCsvUrl,
  chargebackPath,
  IUsageClient,
  IUsageQuery,
  usagePath
} from './usage';
import {
  IAuditLog,
  IEndpoint,
  IEndpointRequest,
  IEstimate,
  IEstimatorErrors,
  IIdentity,
  IIncrease,
  IIncreaseList,
  IIncreaseRequest,
  IInventory,
  IJob,
  IJobList,
  IJobLogs,
  IJobPage,
  IJobRequest,
  IModelList,
  INamespaceList,
  IPlanResult,
  IVerification,
  IProfile,
  IChargeback,
  IProfileList,
  IRecommendationList,
  IReplay,
  IReplayRequest,
  IUsage
} from './tokens';

export class QuotaClient implements IQuotaClient, IUsageClient {
  constructor(readonly serverSettings: ServerConnection.ISettings) {}

  /** `GET namespaces`, conditional: an unchanged answer is a bodiless 304 (`ConditionalGet`). */
  namespaces(): Promise<INamespaceList> {
    return this._conditional.get<INamespaceList>('namespaces');
  }

  /** A page of the namespace's jobs, newest first (the first page unless `page` says). */
  jobs(namespace: string, page: IJobPage = {}): Promise<IJobList> {
    const query = new URLSearchParams();
    if (page.limit) {
      query.set('limit', String(page.limit));
    }
    if (page.continue) {
      query.set('continue', page.continue);
    }
    const search = query.toString();
    return this._get<IJobList>(
      `namespaces/${enc(namespace)}/jobs${search ? '?' + search : ''}`
    );
  }

  identity(): Promise<IIdentity> {
    return this._get<IIdentity>('identity');
  }

  inventory(): Promise<IInventory> {
    return this._get<IInventory>('inventory');
  }

  submit(namespace: string, request: IJobRequest): Promise<IJob> {
    return this._send<IJob>(
      `namespaces/${enc(namespace)}/jobs`,
      'POST',
      request
    );
  }

  cancel(namespace: string, name: string): Promise<IJob> {
    return requestAPI<IJob>(
      `namespaces/${enc(namespace)}/jobs/${enc(name)}`,
      this.serverSettings,
      {
        method: 'DELETE'
      }
    );
  }

  /** `POST namespaces/{ns}/endpoints`: serve a model, or a finished fine-tune (`job`). */
  createEndpoint(
    namespace: string,
    request: IEndpointRequest
  ): Promise<IEndpoint> {
    return this._send<IEndpoint>(
      `namespaces/${enc(namespace)}/endpoints`,
      'POST',
      request
    );
  }

  endpoint(namespace: string, name: string): Promise<IEndpoint> {
    return this._get<IEndpoint>(
      `namespaces/${enc(namespace)}/endpoints/${enc(name)}`
    );
  }

  deleteEndpoint(namespace: string, name: string): Promise<IEndpoint> {
    return requestAPI<IEndpoint>(
      `namespaces/${enc(namespace)}/endpoints/${enc(name)}`,
      this.serverSettings,
      { method: 'DELETE' }
    );
  }

  logs(namespace: string, name: string, tailLines: number): Promise<IJobLogs> {
    return this._get<IJobLogs>(
      `namespaces/${enc(namespace)}/jobs/${enc(name)}/logs?tailLines=${tailLines}`
    );
  }

  /** `GET models`: the model ids the estimator knows offline. */
  models(): Promise<IModelList> {
    return this._get<IModelList>('models');
  }

  /** `POST estimate`: the peak GPU memory of an ms-swift argv on `gpus` GPUs. */
  estimate(args: string[], gpus: number): Promise<IEstimate> {
    return this._send<IEstimate>('estimate', 'POST', { args, gpus });
  }

  /** `POST namespaces/{ns}/plan`: the best plan that fits the namespace's balance. */
  plan(namespace: string, args: string[]): Promise<IPlanResult> {
    return this._send<IPlanResult>(
      `namespaces/${enc(namespace)}/plan`,
      'POST',
      { args }
    );
  }

  /** `POST verifications`: start the simulated training step of an argv (or join its run). */
  startVerification(args: string[], gpus: number): Promise<IVerification> {
    return this._send<IVerification>('verifications', 'POST', { args, gpus });
  }

  /** `GET verifications/{id}`: how a verification stands. */
  verification(id: string): Promise<IVerification> {
    return this._get<IVerification>(`verifications/${enc(id)}`);
  }

  /** `POST namespaces/{ns}/jobs/{name}/replan`: the next plan down for a job that ran out of GPU memory. */
  replan(namespace: string, name: string): Promise<IPlanResult> {
    return this._send<IPlanResult>(
      `namespaces/${enc(namespace)}/jobs/${enc(name)}/replan`,
      'POST',
      {}
    );
  }

  /** `GET estimator/errors`: estimate against measured peak, per model family and regime. */
  estimatorErrors(): Promise<IEstimatorErrors> {
    return this._get<IEstimatorErrors>('estimator/errors');
  }

  /** `GET profiles`: every team profile (admins only). */
  profiles(): Promise<IProfileList> {
    return this._get<IProfileList>('profiles');
  }

  /** `PUT profiles/{team}`: replace a team's profile (admins only); 400 with the validation message. */
  putProfile(team: string, profile: IProfile): Promise<IProfile> {
    return this._send<IProfile>(`profiles/${enc(team)}`, 'PUT', profile);
  }

  /** `GET recommendations[?series=true]`: hard quotas recommended from history (a member: their teams'). */
  recommendations(series = false): Promise<IRecommendationList> {
    return this._get<IRecommendationList>(
      series ? 'recommendations?series=true' : 'recommendations'
    );
  }

  /** `POST replay`: the history replayed under proposed profiles (admins); 429 while one runs. */
  replay(request: IReplayRequest): Promise<IReplay> {
    return this._send<IReplay>('replay', 'POST', request);
  }

  /** `GET usage`: resources used over a window, per team, user or job (and per bucket with `step`). */
  usage(query: IUsageQuery): Promise<IUsage> {
    return this._get<IUsage>(usagePath(query));
  }

  /** `GET chargeback?month=`: a month's per-team usage and cost (admins only). */
  chargeback(month: string): Promise<IChargeback> {
    return this._get<IChargeback>(chargebackPath(month));
  }

  /** The address of a month's chargeback as CSV, for a download link. */
  chargebackCsvUrl(month: string): string {
    return chargebackCsvUrl(this.serverSettings.baseUrl, month);
  }

  /** `POST namespaces/{ns}/increases`: ask for a temporary increase (Pending until an admin decides). */
  requestIncrease(
    namespace: string,
    request: IIncreaseRequest
  ): Promise<IIncrease> {
    return this._send<IIncrease>(
      `namespaces/${enc(namespace)}/increases`,
      'POST',
      request
    );
  }

  /**
   * `GET increases`: the newest page of the requests of the user's teams
   * (every team's for an admin). The last answer's `ETag` goes back as
   * `If-None-Match`: an unchanged list is a bodiless 304, and the last list is
   * kept, so a poll reads only what changed.
   */
  increases(): Promise<IIncreaseList> {
    return this._conditional.get<IIncreaseList>('increases');
  }

  /** `POST increases/{name}/approve|deny` (admins; never their own request). */
  decideIncrease(
    name: string,
    approve: boolean,
    comment: string
  ): Promise<IIncrease> {
    const verb = approve ? 'approve' : 'deny';
    return this._send<IIncrease>(`increases/${enc(name)}/${verb}`, 'POST', {
      comment
    });
  }

  /** `GET audit`: the newest page of the audit log, newest first (admins). */
  audit(): Promise<IAuditLog> {
    return this._get<IAuditLog>('audit');
  }

  /** Where the browser downloads the audit log as CSV (`GET audit?format=csv`). */
  auditCsvUrl(): string {
    return URLExt.join(
      this.serverSettings.baseUrl,
      'quota',
      'v1',
      'audit?format=csv'
    );
  }

  /** Where the model's push subscribes (`GET events`; an `EventSource` sends no header, so the token rides in the query). */
  eventsUrl(): string {
    const url = URLExt.join(
      this.serverSettings.baseUrl,
      'quota',
      'v1',
      'events'
    );
    const token = this.serverSettings.token;
    return token ? `${url}?token=${encodeURIComponent(token)}` : url;
  }

  private get _conditional(): ConditionalGet {
    this._reads ??= new ConditionalGet(this.serverSettings);
    return this._reads;
  }

  private _reads: ConditionalGet | null = null;

  private _get<T>(endPoint: string): Promise<T> {
    return requestAPI<T>(endPoint, this.serverSettings);
  }

  private _send<T>(
    endPoint: string,
    method: string,
    body: unknown
  ): Promise<T> {
    return requestAPI<T>(endPoint, this.serverSettings, {
      method,
      body: JSON.stringify(body)
    });
  }
}

function enc(segment: string): string {
  return encodeURIComponent(segment);
}
