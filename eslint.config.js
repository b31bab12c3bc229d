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
    files: ['test/**', 'bench/**'],
    rules: {
      // A test states that a value is there with `!`; if it is not, the test fails, as it should.
      '@typescript-eslint/no-non-null-assertion': 'off',
      // `expect(obj.method).toHaveBeenCalled()` and vi.fn() mocks pass methods unbound on purpose.
      '@typescript-eslint/unbound-method': 'off',
      // Tests and benches read wire JSON typed `any`, and vitest's asymmetric matchers (expect.any(),
      // expect.stringMatching()) are typed `any`: the assertions are what check those values.
      '@typescript-eslint/no-unsafe-assignment': 'off',
      '@typescript-eslint/no-unsafe-member-access': 'off',
      '@typescript-eslint/no-unsafe-call': 'off',
      '@typescript-eslint/no-unsafe-argument': 'off',
      '@typescript-eslint/no-unsafe-return': 'off',
      // Fakes satisfy a Promise-returning contract (a Runner's run, a closer) with `async () => value`.
      '@typescript-eslint/require-await': 'off',
      // Teardown guards on values a failed beforeAll may have left unset, and checks on wire JSON.
      '@typescript-eslint/no-unnecessary-condition': 'off',
      // The fuzz oracles' `return fail(...)` / `return expectResult(...)` in unannotated helpers.
      '@typescript-eslint/no-confusing-void-expression': 'off',
      // Still to sort through in tests (a few sites each, mostly JSON typed any); src keeps them on.
      '@typescript-eslint/no-base-to-string': 'off',
      '@typescript-eslint/restrict-plus-operands': 'off',
      '@typescript-eslint/use-unknown-in-catch-callback-variable': 'off',
      '@typescript-eslint/no-meaningless-void-operator': 'off',
      '@typescript-eslint/no-dynamic-delete': 'off',
      '@typescript-eslint/no-unnecessary-type-conversion': 'off',
    },
  },
  {
    // The build's own scripts and this file are outside the TypeScript project: linted untyped.
    files: ['*.js', 'scripts/**', 'bin/**'],
    ...tseslint.configs.disableTypeChecked,
  },
  {
    // The dashboard's DOM modules are plain browser JavaScript, not type-checked (only state.js and
    // timeline.js are, by @ts-check): every value there is `any`, so typed rules would only report that.
    files: ['src/http/ui/app.js', 'src/http/ui/api.js', 'src/http/ui/dom.js', 'src/http/ui/forms.js', 'src/http/ui/render.js', 'src/http/ui/timeline-view.js'],
    ...tseslint.configs.disableTypeChecked,
  },
);
