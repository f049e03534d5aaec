/** Stand-in for `@jupyterlab/services` in Jest: requests go to the settings' `fetch`. */
export namespace ServerConnection {
  export interface ISettings {
    baseUrl: string;
    fetch: (url: string, init: RequestInit) => Promise<Response>;
  }

  export function makeSettings(): ISettings {
    return { baseUrl: 'http://localhost/', fetch: () => Promise.reject(new Error('no server')) };
  }

  export function makeRequest(
    url: string,
    init: RequestInit,
    settings: ISettings
  ): Promise<Response> {
    return settings.fetch(url, init);
  }
}
