export const run = async (_: { tenant: string; session: string; turnId: string | undefined; json: boolean }): Promise<number> => 1
