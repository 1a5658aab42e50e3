import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { IApiError } from './tokens';

/**
 * Shown when the REST API is not there at all: the Python package is missing
 * or its server extension is not enabled.
 */
export const EXTENSION_MISSING_MESSAGE =
  'The jupyter_quota server extension is not installed or not enabled: ' +
  'run `pip install jupyter_quota` and restart the server.';

/**
 * Call the jupyter_quota REST API at `{base_url}quota/v1/{endPoint}`.
 *
 * @returns the parsed JSON body.
 * @throws {QuotaApiError} with the server's `{reason, message}` when the
 * response is not ok, `reason` `ServerExtensionMissing` when no handler
 * answered, and `NetworkError` (status 0) when the server could not be reached.
 */
export async function requestAPI<T>(
  endPoint: string,
  serverSettings: ServerConnection.ISettings,
  init: RequestInit = {}
): Promise<T> {
  const url = URLExt.join(serverSettings.baseUrl, 'quota', 'v1', endPoint);

  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, serverSettings);
  } catch (error) {
    throw new QuotaApiError(0, 'NetworkError', Private.describe(error));
  }

  const body = Private.parse(await response.text());

  if (!response.ok) {
    throw QuotaApiError.fromResponse(response, body);
  }
  return body as T;
}

/**
 * An error answered by the jupyter_quota API (or by its absence).
 */
export class QuotaApiError extends Error implements IApiError {
  constructor(
    readonly status: number,
    readonly reason: string,
    message: string
  ) {
    super(message);
    this.name = 'QuotaApiError';
  }

  /**
   * Build the error for a response that is not ok.
   *
   * Every error our API returns carries a JSON `{reason, message}`. A 404
   * without one comes from the server's own "page not found" handler: no
   * route under `quota/v1` exists, so the server extension is not loaded.
   */
  static fromResponse(response: Response, body: unknown): QuotaApiError {
    const error = Private.asApiError(body);
    if (error) {
      return new QuotaApiError(response.status, error.reason, error.message);
    }
    if (response.status === 404) {
      return new QuotaApiError(
        404,
        'ServerExtensionMissing',
        EXTENSION_MISSING_MESSAGE
      );
    }
    const message =
      Private.messageOf(body) ||
      `${response.status} ${response.statusText}`.trim();
    return new QuotaApiError(
      response.status,
      response.statusText || 'Error',
      message
    );
  }
}

namespace Private {
  export function parse(text: string): unknown {
    if (!text) {
      return null;
    }
    try {
      return JSON.parse(text);
    } catch {
      return text;
    }
  }

  export function asApiError(body: unknown): IApiError | null {
    if (
      body !== null &&
      typeof body === 'object' &&
      typeof (body as IApiError).reason === 'string' &&
      typeof (body as IApiError).message === 'string'
    ) {
      const { reason, message } = body as IApiError;
      return { reason, message };
    }
    return null;
  }

  export function messageOf(body: unknown): string {
    if (body !== null && typeof body === 'object') {
      const message = (body as { message?: unknown }).message;
      return typeof message === 'string' ? message : '';
    }
    return '';
  }

  export function describe(error: unknown): string {
    return error instanceof Error ? error.message : String(error);
  }
}
