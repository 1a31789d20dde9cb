import type { InstanceWrapper } from '@nestjs/core/injector/instance-wrapper';
import { leaderOnlyDeclarations } from '../lock-service.holder';
import { leaderDeclaration } from './leader.decorator';
import type { LeaderService } from './leader.service';
import type { Leadership, OnLeadershipGranted, OnLeadershipRevoked } from './leader.interfaces';

/**
 * At bootstrap: one elector per `@LeaderOnly` name and per `@Leader` provider of the
 * application, so leadership is settled before the first `@Cron` tick asks for it. Request-scoped
 * and transient instances do not exist yet: a `@LeaderOnly` method on one starts its elector at
 * its first call.
 */
export function startLeaderCampaigns(
  leaders: LeaderService,
  wrappers: readonly InstanceWrapper[],
): void {
  const seen = new Set<unknown>();
  for (const wrapper of wrappers) {
    const type: unknown = wrapper.metatype;
    if (typeof type !== 'function' || seen.has(type)) continue;
    seen.add(type);
    for (const { name, options } of leaderOnlyDeclarations(type.prototype as object)) {
      leaders.elector(name, options);
    }
    const declared = leaderDeclaration(type);
    if (!declared) continue;
    const instance = (
      wrapper.isDependencyTreeStatic() && !wrapper.isTransient ? wrapper.instance : undefined
    ) as Partial<OnLeadershipGranted & OnLeadershipRevoked> | undefined;
    if (!instance) continue;
    leaders.elector(declared.name, declared.options, {
      granted: (leadership: Leadership) => instance.onLeadershipGranted?.(leadership),
      revoked: () => instance.onLeadershipRevoked?.(),
    });
  }
}
