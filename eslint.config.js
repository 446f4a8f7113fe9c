import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["**/node_modules/**", "docs/**", "bench/results/**", ".nx/**", "**/dist/**"] },
  // Type-aware: the promise rules (no-floating-promises, no-misused-promises,
  // await-thenable, require-await) and the no-unsafe-* (any) family.
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        // One program for the whole repository (the root tsconfig includes every
        // linted .ts file). `projectService` opens the nearest tsconfig per file,
        // i.e. one program per package, each re-reading Effect's types: on 2 cores
        // it ran 9.5 min and ran out of memory at 4 GB.
        project: ["./tsconfig.json"],
        tsconfigRootDir: import.meta.dirname,
      },
    },
  },
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-namespace": "off",
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "no-console": ["error", { allow: ["warn", "error"] }],
      // Style only (a `!` or `as` the checker can prove redundant), no bug class;
      // its autofix would churn files under concurrent refactoring. Follow-up.
      "@typescript-eslint/no-unnecessary-type-assertion": "off",
      // Only flags `x?: T | undefined`, the codebase's deliberate spelling of optionals.
      "@typescript-eslint/no-duplicate-type-constituents": "off",
      // Flags String(unknown) on untyped wire JSON and Effect errors (which define
      // toString), all deliberate diagnostics here.
      "@typescript-eslint/no-base-to-string": "off",
    },
  },
  {
    files: ["**/scripts/**", "bench/**", "**/test/**", "test/**", "deploy/**"],
    rules: { "no-console": "off" },
  },
  {
    // Tests poke at parsed JSON bodies and provider payloads (`any` by nature);
    // typing every probe would add noise, not safety. The promise rules stay on.
    files: ["**/test/**", "test/**"],
    rules: {
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
    },
  },
  {
    // Plain JS (this file) is in no tsconfig: no type information to check with.
    files: ["**/*.js"],
    ...tseslint.configs.disableTypeChecked,
  },
)
