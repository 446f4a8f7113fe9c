import tseslint from "typescript-eslint"

export default tseslint.config(
  { ignores: ["**/node_modules/**", "docs/**", "bench/results/**", ".nx/**"] },
  ...tseslint.configs.recommended,
  {
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_", varsIgnorePattern: "^_" }],
      "@typescript-eslint/no-explicit-any": "error",
      "@typescript-eslint/no-namespace": "off",
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "no-console": ["error", { allow: ["warn", "error"] }],
    },
  },
  {
    files: ["**/scripts/**", "bench/**", "**/test/**", "test/**", "deploy/**"],
    rules: { "no-console": "off" },
  },
)
