export * as Database from "./Database.ts"
export * as KnowledgeStore from "./KnowledgeStore.ts"
export * as Migrations from "./Migrations.ts"
export * as SessionStore from "./SessionStore.ts"
