// Generated from the kubewasm WIT by scripts/gen-wit-types.js (jco guest types). Do not edit.
declare module 'kubewasm:controller/log@0.1.6' {
  /**
   * Writes one log record. Never fails; records below the host's level are dropped cheaply.
   */
  export function emit(level: Level, message: string, fields: Array<Field>): void;
  /**
   * # Variants
   * 
   * ## `"trace"`
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
  export interface Field {
    key: string,
    value: string,
  }
}
