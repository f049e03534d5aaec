/** Stand-in for `@jupyterlab/coreutils` in Jest: the one helper the API client uses. */
export namespace URLExt {
  /** Join URL parts with single slashes, as JupyterLab's `URLExt.join` does for these. */
  export function join(...parts: string[]): string {
    return parts
      .filter(part => part !== '')
      .map((part, index) =>
        index === 0 ? part.replace(/\/+$/, '') : part.replace(/^\/+|\/+$/g, '')
      )
      .join('/');
  }
}
