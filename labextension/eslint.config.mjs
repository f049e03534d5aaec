// Lint rules for the sidebar's TypeScript (run by `jlpm lint`, which the test command runs).
import js from '@eslint/js';
import prettier from 'eslint-config-prettier';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['lib/', 'node_modules/', 'coverage/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  prettier,
  {
    files: ['src/**/*.ts', 'test/**/*.ts'],
    rules: {
      // Namespaces hold the command ids, as JupyterLab's own extensions do.
      '@typescript-eslint/no-namespace': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_' }],
      eqeqeq: ['error', 'smart'],
      // Memory text reaches the page as text or through JupyterLab's sanitiser, never as HTML.
      'no-restricted-properties': [
        'error',
        { property: 'innerHTML' },
        { property: 'outerHTML' },
        { property: 'insertAdjacentHTML' }
      ]
    }
  }
);
