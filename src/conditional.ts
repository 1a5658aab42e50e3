/**
 * Conditional reads: the last answer's `ETag` goes back as `If-None-Match`,
 * and an unchanged answer (a bodiless 304) is served from the last body. A
 * poll then moves a few headers, not the data (`GET namespaces`,
 * `GET increases`).
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { QuotaApiError } from './request';

export class ConditionalGet {
  constructor(readonly serverSettings: ServerConnection.ISettings) {}

  /** `GET {base_url}quota/v1/{endPoint}`, or its last body when the server answers 304. */
  async get<T>(endPoint: string): Promise<T> {
    const url = URLExt.join(
      this.serverSettings.baseUrl,
      'quota',
      'v1',
      endPoint
    );
    const last = this._last.get(endPoint);
    const init = last ? { headers: { 'If-None-Match': last.etag } } : {};
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(
        url,
        init,
        this.serverSettings
      );
    } catch (error) {
      throw new QuotaApiError(0, 'NetworkError', String(error));
    }
    if (response.status === 304 && last) {
      return last.body as T;
    }
    const text = await response.text();
    let body: unknown = null;
    try {
      body = text ? JSON.parse(text) : null;
    } catch {
      body = text;
    }
    if (!response.ok) {
      throw QuotaApiError.fromResponse(response, body);
    }
    const etag = response.headers.get('ETag');
    if (etag) {
      this._last.set(endPoint, { etag, body });
    } else {
      this._last.delete(endPoint);
    }
    return body as T;
  }

  private _last = new Map<string, { etag: string; body: unknown }>();
}
