export declare const chromiumArgs: string[];
export declare function chromiumPath(): string | null;
