// Lint: typescript-eslint's strict type-checked set, so the type checker's knowledge (floating
// promises, dead conditions, needless assertions) reaches the lint; no console in src (logs go
// through pino to stderr; stdout belongs to the protocol). Each rule turned off or configured
// below says why, in one line.
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/**', 'coverage/**', 'bench/results/**', 'dist/**', '.bench-build/**'] },
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // Arrow shorthands (`(e) => this.#onEvent(e)`), `() => void promise` and `return send(...)` in
      // a void function are idioms the code uses on purpose; a void value used as a value still fails.
      '@typescript-eslint/no-confusing-void-expression': [
        'error',
        { ignoreArrowShorthand: true, ignoreVoidOperator: true, ignoreVoidReturningFunctions: true },
      ],
      // Numbers and booleans print as expected in a message; objects, nullish and unknown still fail.
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true, allowBoolean: true }],
      // ws types a message as RawData, which names ArrayBuffer: only binaryType 'arraybuffer' gives one, and no socket here sets it.
      '@typescript-eslint/no-base-to-string': ['error', { ignoredTypeNames: ['Error', 'RegExp', 'URL', 'URLSearchParams', 'ArrayBuffer'] }],
      // Passing on a caught error as it came (`catch (err) { reject(err) }`) is not inventing a non-Error reason.
      '@typescript-eslint/prefer-promise-reject-errors': ['error', { allowThrowingUnknown: true }],
    },
  },
  {
    files: ['**/*.ts'],
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': ['error', { checksVoidReturn: false }],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
    },
  },
  {
    files: ['src/**/*.ts'],
    rules: { 'no-console': 'error' },
  },
  {
    // The dashboard's app and api modules are plain browser JavaScript, not type-checked (only
    // state.js is, by @ts-check): every value there is `any`, so typed rules would only report that.
    files: ['src/http/ui/app.js', 'src/http/ui/api.js'],
    ...tseslint.configs.disableTypeChecked,
  },
);
