import { describe, expect, it } from 'vitest';
import { ChatTemplate } from './chat-template';

// SmolVLM's published chat template (HuggingFaceTB/SmolVLM-*-Instruct; transformers quotes it in
// tests/models/smolvlm/test_processor_smolvlm.py): it tests content[0].type and loops over parts,
// with no branch for string content.
const SMOLVLM =
  "<|im_start|>{% for message in messages %}{{message['role'] | capitalize}}{% if message['content'][0]['type'] == 'image' %}{{':'}}{% else %}{{': '}}{% endif %}" +
  "{% for line in message['content'] %}{% if line['type'] == 'text' %}{{line['text']}}{% elif line['type'] == 'image' %}{{ '<image>' }}{% endif %}{% endfor %}" +
  "<end_of_utterance>\n{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %}";

const image = (url = 'data:image/png;base64,AAAA') => ({ type: 'image_url', image_url: { url } });

describe('chat templates with image parts', () => {
  it("gives SmolVLM's template transformers' {type: 'image'} parts, content kept as a list", () => {
    const t = new ChatTemplate(SMOLVLM, { specialTokens: ['<image>', '<end_of_utterance>', '<|im_start|>'] });
    expect(t.inputRules.contentParts).toBe(true);
    const r = t.render({
      messages: [{ role: 'user', content: [image(), { type: 'text', text: 'What is this?' }, image(), { type: 'text', text: 'And this?' }] }],
      add_generation_prompt: true,
    });
    // An image first: "User:" with no space; parts joined with no separator.
    expect(r.prompt).toBe('<|im_start|>User:<image>What is this?<image>And this?<end_of_utterance>\nAssistant:');
  });

  it('turns string content into one text part for a template that shows only parts (probed once at load)', () => {
    const t = new ChatTemplate(SMOLVLM);
    expect(t.inputRules.typedContent).toBe(true);
    const r = t.render({
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: [{ type: 'text', text: 'Look: ' }, image()] },
        { role: 'assistant', content: 'A cat.' },
        { role: 'user', content: 'Colour?' },
      ],
      add_generation_prompt: true,
    });
    expect(r.prompt).toBe(
      '<|im_start|>System: Be brief.<end_of_utterance>\nUser: Look: <image><end_of_utterance>\nAssistant: A cat.<end_of_utterance>\nUser: Colour?<end_of_utterance>\nAssistant:',
    );
  });

  it('leaves string content alone for templates that show it, and drops images for templates that take no parts', () => {
    const plain = new ChatTemplate('{% for m in messages %}[{{ m.content }}]{% endfor %}');
    expect(plain.inputRules.typedContent).toBe(false);
    expect(plain.render({ messages: [{ role: 'user', content: 'hi' }] }).prompt).toBe('[hi]');
    expect(plain.render({ messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, image()] }] }).prompt).toBe('[a]');
    // A template that handles both forms itself (Qwen-VL style) keeps strings as strings.
    const both = new ChatTemplate("{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for p in m.content %}{{ p.type }};{% endfor %}{% endif %}{% endfor %}");
    expect(both.inputRules.typedContent).toBe(false);
    expect(both.render({ messages: [{ role: 'user', content: 'hi' }, { role: 'user', content: [image(), { type: 'text', text: 'x' }] }] }).prompt).toBe('hiimage;text;');
  });
});
