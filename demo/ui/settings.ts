/**
 * The settings panel: what it holds, how it becomes request fields, and its persistence in
 * localStorage. Only fields that differ from the server's behaviour are sent, so the request and
 * the code panel stay short.
 */

export interface ChatSettings {
  system: string;
  temperature: number;
  topP: number;
  maxTokens: number;
  /** Qwen3-style templates: false sends `chat_template_kwargs: {enable_thinking: false}`. */
  thinking: boolean;
  /** Offer the sample `get_weather` tool, to see tool calls. */
  tools: boolean;
  /** `response_format: {type: 'json_object'}`: the engine's grammar mask makes the reply valid JSON. */
  json: boolean;
}

export const DEFAULTS: ChatSettings = { system: '', temperature: 0.7, topP: 0.95, maxTokens: 256, thinking: true, tools: false, json: false };

/** The sample tool: the page never runs it, it only shows the call the model wrote. */
export const WEATHER_TOOL = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'Current weather for a city',
    parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
  },
} as const;

/** The request fields these settings add (besides model, messages and stream). */
export function requestFields(s: ChatSettings): Record<string, unknown> {
  const f: Record<string, unknown> = { temperature: s.temperature, top_p: s.topP, max_tokens: s.maxTokens };
  if (s.tools) f.tools = [WEATHER_TOOL];
  if (!s.thinking) f.chat_template_kwargs = { enable_thinking: false };
  if (s.json) f.response_format = { type: 'json_object' };
  return f;
}

const STORAGE_KEY = 'webgpu-llm-demo:settings';

export class SettingsForm {
  private readonly el: {
    system: HTMLTextAreaElement;
    temperature: HTMLInputElement;
    temperatureOut: HTMLOutputElement;
    topP: HTMLInputElement;
    topPOut: HTMLOutputElement;
    maxTokens: HTMLInputElement;
    thinking: HTMLInputElement;
    tools: HTMLInputElement;
    json: HTMLInputElement;
  };

  constructor(
    root: HTMLElement,
    private readonly onChange: () => void,
  ) {
    const q = <T extends Element>(sel: string) => root.querySelector<T & Element>(sel)!;
    this.el = {
      system: q<HTMLTextAreaElement>('#system-prompt'),
      temperature: q<HTMLInputElement>('#temperature'),
      temperatureOut: q<HTMLOutputElement>('#temperature-value'),
      topP: q<HTMLInputElement>('#top-p'),
      topPOut: q<HTMLOutputElement>('#top-p-value'),
      maxTokens: q<HTMLInputElement>('#max-tokens'),
      thinking: q<HTMLInputElement>('#thinking'),
      tools: q<HTMLInputElement>('#tools'),
      json: q<HTMLInputElement>('#json-mode'),
    };
    this.write(load());
    root.addEventListener('input', () => this.changed());
    root.addEventListener('change', () => this.changed());
    root.querySelector('#reset-settings')?.addEventListener('click', () => {
      this.write(DEFAULTS);
      this.changed();
    });
  }

  read(): ChatSettings {
    const num = (el: HTMLInputElement, fallback: number, min: number, max: number) => {
      const v = el.valueAsNumber;
      return Number.isFinite(v) ? Math.min(max, Math.max(min, v)) : fallback;
    };
    return {
      system: this.el.system.value.trim(),
      temperature: num(this.el.temperature, DEFAULTS.temperature, 0, 2),
      topP: num(this.el.topP, DEFAULTS.topP, 0.01, 1),
      maxTokens: Math.round(num(this.el.maxTokens, DEFAULTS.maxTokens, 1, 32768)),
      thinking: this.el.thinking.checked,
      tools: this.el.tools.checked,
      json: this.el.json.checked,
    };
  }

  private write(s: ChatSettings): void {
    this.el.system.value = s.system;
    this.el.temperature.value = String(s.temperature);
    this.el.topP.value = String(s.topP);
    this.el.maxTokens.value = String(s.maxTokens);
    this.el.thinking.checked = s.thinking;
    this.el.tools.checked = s.tools;
    this.el.json.checked = s.json;
    this.showValues();
  }

  private changed(): void {
    this.showValues();
    try {
      localStorage.setItem(STORAGE_KEY, JSON.stringify(this.read()));
    } catch {
      // Storage may be off (private mode): settings then last for the visit only.
    }
    this.onChange();
  }

  private showValues(): void {
    this.el.temperatureOut.value = Number(this.el.temperature.value).toFixed(2);
    this.el.topPOut.value = Number(this.el.topP.value).toFixed(2);
  }
}

function load(): ChatSettings {
  try {
    const saved = JSON.parse(localStorage.getItem(STORAGE_KEY) ?? 'null') as Partial<ChatSettings> | null;
    return { ...DEFAULTS, ...(saved ?? {}) };
  } catch {
    return DEFAULTS;
  }
}
