export * as Database from "./Database.ts"
export * as Migrations from "./Migrations.ts"
export * as SessionStore from "./SessionStore.ts"
