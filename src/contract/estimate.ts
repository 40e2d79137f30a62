/**
 * Input tokens of a request body, estimated as ceil(bytes / 4). BPE
 * tokenizers average about 4 bytes of English per token and a JSON body
 * carries field names and punctuation on top of the prompt, so this is an
 * upper-ish estimate for English and cheap enough for the hot path. It only
 * picks the long-context class; bodies of limits.offload_bytes or more are
 * token-counted in the offload pool instead (sampled past 128 Ki characters).
 */
export function estimateInputTokens(bodyBytes: number): number {
  return bodyBytes > 0 ? Math.ceil(bodyBytes / 4) : 0;
}
