export * as ClientError from "./ClientError.ts"
export * as ContextClient from "./ContextClient.ts"
