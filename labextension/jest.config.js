/**
 * Jest for the sidebar's API client and model (`jlpm test`). JupyterLab's packages ship ES
 * modules for a browser; the two the client needs are replaced by small stand-ins in
 * test/stubs (the tests drive our code, not JupyterLab's).
 */
module.exports = {
  testEnvironment: 'node',
  roots: ['<rootDir>/test'],
  transform: { '^.+\\.ts$': ['ts-jest', { tsconfig: 'test/tsconfig.json' }] },
  moduleNameMapper: {
    '^@jupyterlab/coreutils$': '<rootDir>/test/stubs/coreutils.ts',
    '^@jupyterlab/services$': '<rootDir>/test/stubs/services.ts'
  }
};
