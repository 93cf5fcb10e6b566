// @ts-check
/**
 * TypeDoc plugin for @jobs: doc comments say "@jobs" (the project's name) in running text,
 * which TSDoc would read as an unknown block tag. This puts such a tag back into the text it
 * was cut from and keeps its warning out of the count, so `treatWarningsAsErrors` still fails
 * on every other warning (broken links, referenced types that are not exported). It also names
 * each entry point's module after the package it is (`packages/core/src/sql` → `@jobs/core/sql`).
 */
import { Converter } from 'typedoc';

const NAME = '@jobs';

/** @param {import('typedoc').Application} app */
export function load(app) {
  const warn = app.logger.warn.bind(app.logger);
  app.logger.warn = (message, ...rest) => {
    if (String(message).endsWith(`unknown block tag ${NAME}`)) return;
    // @ts-expect-error the overloads share this shape
    warn(message, ...rest);
  };
  app.converter.on(Converter.EVENT_RESOLVE_BEGIN, (context) => {
    for (const module of context.project.children ?? []) {
      const match = /^(?:packages\/)?([\w-]+)\/src(?:\/index)?(?:\/([\w-]+?))?(?:\/index)?$/.exec(
        module.name,
      );
      if (match) module.name = `@jobs/${match[1]}${match[2] ? `/${match[2]}` : ''}`;
    }
    for (const reflection of Object.values(context.project.reflections)) {
      const comment = reflection.comment;
      if (!comment) continue;
      const kept = [];
      for (const tag of comment.blockTags) {
        if (tag.tag !== NAME) {
          kept.push(tag);
          continue;
        }
        const target = kept.length > 0 ? kept[kept.length - 1].content : comment.summary;
        target.push({ kind: 'text', text: ` ${NAME} ` }, ...tag.content);
      }
      comment.blockTags = kept;
    }
  });
}
